package seglog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/kafkalog/compact"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// Errors returned by Clean.
var (
	ErrNotPartitionDir = errors.New("seglog: log directory is not named <topic>-<partition>, so it has no cleaner checkpoint entry")
	ErrCleanAbandoned  = errors.New("seglog: cleaning abandoned: the segments changed while it ran")
)

// CleanStats describes one Clean call. Offsets are Kafka offsets, sizes
// bytes.
type CleanStats struct {
	// Cleaned is true when the log was rewritten.
	Cleaned bool
	// Reason says why Clean ran ("dirty ratio", "max.compaction.lag.ms") or
	// why it did not.
	Reason string
	// FirstDirtyOffset is the cleaner checkpoint Clean started from;
	// FirstUncleanableOffset is the end of the cleanable range, the new
	// checkpoint when Cleaned.
	FirstDirtyOffset, FirstUncleanableOffset int64
	// DirtyRatio is dirty bytes / cleanable bytes.
	DirtyRatio float64
	// SegmentsRead and SegmentsWritten count the segments replaced and the
	// segments that replaced them.
	SegmentsRead, SegmentsWritten int
	BytesRead, BytesWritten       int64
	RecordsRead, RecordsKept      int
	// LatestDeleteHorizonMs is the largest delete horizon (ms, KIP-534)
	// still ahead of the pass's clock among the batches the pass kept; 0
	// when none. Once it passes, Clean runs even with nothing dirty, to
	// drop the tombstones and markers it covers, as Kafka's
	// LogCleanerManager does for logs whose latest delete horizon passed.
	LatestDeleteHorizonMs int64
}

// cleanPlan is what one cleaning works on, taken under the read lock.
type cleanPlan struct {
	tp         kafkalog.TopicPartition
	segs       []*segment // log start .. first uncleanable, all rolled
	firstDirty int64
	end        int64 // first uncleanable offset, a segment base offset
	aborted    []index.AbortedTxn
	producers  map[int64]compact.Producer
	nowMs      int64
}

// CheckpointPath returns the path of the cleaner checkpoint file of the
// log dir holding this partition: "<parent of Dir>/cleaner-offset-checkpoint".
func (l *Log) CheckpointPath() string {
	return filepath.Join(filepath.Dir(l.dir), checkpoint.CleanerOffsetFile)
}

// CleanerCheckpoint returns this partition's entry of the cleaner
// checkpoint (the first dirty offset: every offset below it has been
// cleaned), and false when the file or the entry is missing. Errors are
// the file's parse or I/O errors and ErrNotPartitionDir.
func (l *Log) CleanerCheckpoint() (int64, bool, error) {
	tp, ok := kafkalog.ParsePartitionDir(filepath.Base(l.dir))
	if !ok {
		return 0, false, fmt.Errorf("%w: %s", ErrNotPartitionDir, l.dir)
	}
	m, err := checkpoint.ReadFile(l.CheckpointPath())
	if err != nil {
		return 0, false, err
	}
	off, ok := m[tp]
	return off, ok, nil
}

// dropStaleCleanerCheckpoint removes this partition's cleaner checkpoint
// entry when Open creates the log afresh: an entry left by an earlier log
// of the same name (a topic deleted and recreated) would make the new
// log's first offsets count as cleaned, so a key's older value there would
// never be compared with its later records and would outlive its
// tombstone. Kafka removes the entry when it deletes the log. A corrupt
// checkpoint file is an error only when cleanup.policy includes compact.
func (l *Log) dropStaleCleanerCheckpoint() error {
	tp, ok := kafkalog.ParsePartitionDir(filepath.Base(l.dir))
	if !ok {
		return nil
	}
	err := checkpoint.Remove(l.CheckpointPath(), tp)
	if err != nil && !l.cfg.Compact() {
		if l.logger != nil {
			l.logger.Warn("cannot remove a stale cleaner checkpoint entry", "dir", l.dir, "err", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove stale cleaner checkpoint entry: %w", err)
	}
	return nil
}

// Clean runs one pass of Kafka's log cleaner over the log when
// cleanup.policy includes compact, as LogCleaner does for one partition:
//
//   - The cleanable range runs from the log start offset to the first
//     uncleanable offset: the base offset of the active segment, of the
//     segment holding the first offset of an open transaction (the last
//     stable offset), or of the first dirty segment whose max timestamp is
//     within min.compaction.lag.ms of now, whichever is lowest. The active
//     segment is never cleaned.
//   - The dirty range starts at the cleaner checkpoint (the log start
//     offset when there is none, or when it is out of range). Clean runs
//     when dirty bytes / cleanable bytes > min.cleanable.dirty.ratio, or
//     when a dirty segment's first batch is older than
//     max.compaction.lag.ms.
//   - A key map of the dirty range is built, then the whole cleanable range
//     is rewritten by package compact's rules into segments no larger than
//     segment.bytes, each named by the base offset of the first segment it
//     replaces, with rebuilt indexes; offsets stay, gaps appear.
//   - Each group is swapped in as Kafka does: <base>.*.cleaned written and
//     fsynced, renamed to .swap, the old segments renamed to .deleted, the
//     .swap files renamed to live names, the .deleted files removed. Open
//     finishes or discards an interrupted swap (cleanrecover.go).
//   - Finally the checkpoint file in the log dir gets this partition's new
//     first dirty offset, the first uncleanable offset.
//
// Reads run concurrently; each swap takes the log's lock. An I/O error
// after a group's .swap files exist leaves them for Open to finish (Clean
// then returns that error until the log is reopened). Errors:
// ErrNotPartitionDir, ErrCleanAbandoned (tiering removed a segment while
// Clean ran; nothing changed), ErrClosed, corruption errors for a segment
// with a bad CRC (its group is left as it was; groups before it in the
// pass may have been swapped, the log stays consistent and the
// checkpoint does not move), I/O errors.
func (l *Log) Clean() (CleanStats, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if l.swapPending != nil {
		return CleanStats{}, l.swapPending
	}
	if !l.cfg.Compact() {
		return CleanStats{Reason: "cleanup.policy does not include compact"}, nil
	}
	tp, ok := kafkalog.ParsePartitionDir(filepath.Base(l.dir))
	if !ok {
		return CleanStats{}, fmt.Errorf("%w: %s", ErrNotPartitionDir, l.dir)
	}
	l.Refresh()
	firstOpen, err := l.scanOpenTxns()
	if err != nil {
		return CleanStats{}, fmt.Errorf("find open transactions: %w", err)
	}
	p, st, err := l.planClean(tp, firstOpen)
	if err != nil || !st.Cleaned {
		return st, err
	}
	m, err := l.buildOffsetMap(p)
	if err != nil {
		return CleanStats{}, l.abandonedBy(p.segs, err)
	}
	f := compact.NewFilter(m, compact.Options{
		NowMs: p.nowMs, DeleteRetentionMs: l.cfg.DeleteRetentionMs, Aborted: p.aborted,
		ActiveProducers: p.producers, Compressor: codec.Kafka, Decompressor: codec.Kafka,
	})
	keptTxns := 0
	for _, g := range l.groupSegments(p.segs) {
		ns, err := l.writeCleaned(g, f, &keptTxns, &st)
		if err != nil {
			return st, l.abandonedBy(g, err)
		}
		if err := l.swapIn(g, ns); err != nil {
			return st, err
		}
		st.SegmentsRead += len(g)
		st.SegmentsWritten++
	}
	l.mu.Lock()
	l.latestDeleteHorizon = st.LatestDeleteHorizonMs
	l.mu.Unlock()
	crashpoint.Hit("seglog.clean.checkpoint")
	if err := checkpoint.Update(l.CheckpointPath(), tp, p.end); err != nil {
		return st, fmt.Errorf("write cleaner checkpoint: %w", err)
	}
	return st, nil
}

// abandonedBy returns err wrapped with ErrCleanAbandoned when segs are no
// longer all in the log: Refresh dropped and closed a segment tiering
// removed while Clean was reading it, which is why the read failed.
func (l *Log) abandonedBy(segs []*segment, err error) error {
	if len(segs) == 0 {
		return err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.groupIndex(segs) < 0 {
		return fmt.Errorf("%w: %w", ErrCleanAbandoned, err)
	}
	return err
}

// planClean picks the cleanable and dirty ranges and decides whether to
// clean; st.Cleaned is true when it should. firstOpen is the first offset
// of the earliest open transaction found in the log, -1 for none.
func (l *Log) planClean(tp kafkalog.TopicPartition, firstOpen int64) (cleanPlan, CleanStats, error) {
	cp, cpOK, err := l.CleanerCheckpoint()
	if err != nil {
		return cleanPlan{}, CleanStats{}, fmt.Errorf("read cleaner checkpoint: %w", err)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return cleanPlan{}, CleanStats{}, ErrClosed
	}
	p := cleanPlan{tp: tp, nowMs: l.now().UnixMilli(), producers: map[int64]compact.Producer{}}
	start, hw := l.segs[0].base, l.active().nextOffset
	p.firstDirty = cp
	if !cpOK || cp < start || cp > hw {
		p.firstDirty = start // LogCleanerManager resets an out-of-range checkpoint
	}
	p.end = l.active().base
	lso := int64(math.MaxInt64)
	for pid, ps := range l.producers {
		if ps.txnFirst >= 0 {
			lso = min(lso, ps.txnFirst)
		}
		p.producers[pid] = compact.Producer{LastDataOffset: ps.lastData, Epoch: ps.epoch}
	}
	if firstOpen >= 0 {
		lso = min(lso, firstOpen)
	}
	rolled := l.segs[:len(l.segs)-1]
	for _, s := range rolled {
		lagged := l.cfg.MinCompactionLagMs > 0 && s.nextOffset > p.firstDirty && s.largestTimestamp() > p.nowMs-l.cfg.MinCompactionLagMs
		if s.nextOffset > lso || lagged {
			p.end = min(p.end, s.base)
			break
		}
	}
	st := CleanStats{FirstDirtyOffset: p.firstDirty, FirstUncleanableOffset: p.end}
	var cleanBytes, dirtyBytes int64
	earliest := int64(math.MaxInt64)
	for _, s := range rolled {
		if s.base >= p.end {
			break
		}
		p.segs = append(p.segs, s)
		if s.nextOffset <= p.firstDirty {
			cleanBytes += s.size
			continue
		}
		dirtyBytes += s.size
		if ts := s.firstTimestamp(); ts >= 0 {
			earliest = min(earliest, ts)
		}
	}
	dirty := dirtyBytes > 0 && p.firstDirty < p.end
	if dirty {
		st.DirtyRatio = float64(dirtyBytes) / float64(cleanBytes+dirtyBytes)
	}
	// Tombstones and markers whose delete horizon passed are dropped by a
	// pass over the cleaned range even when nothing is dirty
	// (LogCleanerManager's logs with an expired latest delete horizon).
	expired := l.latestDeleteHorizon > 0 && l.latestDeleteHorizon <= p.nowMs && len(p.segs) > 0
	switch {
	case dirty && st.DirtyRatio > l.cfg.MinCleanableDirtyRatio:
		st.Cleaned, st.Reason = true, "dirty ratio"
	case dirty && earliest != math.MaxInt64 && p.nowMs-earliest > l.cfg.MaxCompactionLagMs:
		st.Cleaned, st.Reason = true, "max.compaction.lag.ms"
	case expired:
		st.Cleaned, st.Reason = true, "delete horizon passed"
	case !dirty:
		st.Reason = "nothing dirty to clean"
		return p, st, nil
	default:
		st.Reason = "dirty ratio not above min.cleanable.dirty.ratio"
		return p, st, nil
	}
	for _, s := range l.segs {
		txns, err := readTxnIndex(s.path(kafkalog.TxnIndexSuffix))
		if err != nil {
			return p, CleanStats{}, err
		}
		p.aborted = append(p.aborted, txns...)
	}
	return p, st, nil
}

// largestTimestamp is LogSegment.largestTimestamp: the max timestamp, or
// the file's modification time when no batch has one.
func (s *segment) largestTimestamp() int64 {
	if ts := s.maxTimestamp(); ts >= 0 {
		return ts
	}
	if st, err := s.log.Stat(); err == nil {
		return st.ModTime().UnixMilli()
	}
	return 0
}

// firstTimestamp is the first batch's max timestamp
// (LogSegment.getFirstBatchTimestamp), -1 when unknown.
func (s *segment) firstTimestamp() int64 {
	if s.firstBatchTimestamp >= 0 || s.size < batch.HeaderSize {
		return s.firstBatchTimestamp
	}
	buf := make([]byte, batch.HeaderSize)
	if _, err := s.log.ReadAt(buf, 0); err != nil {
		return -1
	}
	b, err := batch.ParseHeader(buf, 0)
	if err != nil {
		return -1
	}
	return b.MaxTimestamp
}

// readTxnIndex reads a .txnindex file; a missing file has no entries.
func readTxnIndex(path string) ([]index.AbortedTxn, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	txns, err := index.ParseTxnIndex(data)
	return txns, kafkalog.WithFile(err, path)
}

// buildOffsetMap maps the dirty range's keys (Cleaner.buildOffsetMap).
func (l *Log) buildOffsetMap(p cleanPlan) (*compact.OffsetMap, error) {
	m := compact.NewOffsetMap(p.firstDirty, p.aborted, codec.Kafka)
	for _, s := range p.segs {
		if s.nextOffset <= p.firstDirty {
			continue
		}
		if err := eachEntry(s, m.Add); err != nil {
			return nil, err
		}
		m.Cover(s.nextOffset)
	}
	m.Cover(p.end) // with nothing dirty: the map still ends at the cleanable range's end
	return m, nil
}

// eachEntry calls fn with every entry of a rolled segment, checking CRCs.
func eachEntry(s *segment, fn func(raw []byte) error) error {
	sc := batch.NewScanner(s.log, s.size, batch.ScanOptions{VerifyCRC: true})
	for sc.Next() {
		if !sc.CRCValid() {
			return kafkalog.WithFile(kafkalog.Corruptf(sc.Batch().Position, "CRC mismatch"), s.path(kafkalog.LogSuffix))
		}
		raw, err := sc.Raw()
		if err != nil {
			return err
		}
		if err := fn(raw); err != nil {
			return kafkalog.WithFile(err, s.path(kafkalog.LogSuffix))
		}
	}
	return kafkalog.WithFile(sc.Err(), s.path(kafkalog.LogSuffix))
}

// groupSegments groups consecutive segments whose sizes together stay
// within segment.bytes, whose indexes stay within segment.index.bytes and
// whose offsets fit one index (Cleaner.groupSegmentsBySize).
func (l *Log) groupSegments(segs []*segment) [][]*segment {
	var groups [][]*segment
	for len(segs) > 0 {
		g := segs[:1]
		size, offs, times := segs[0].size, len(segs[0].idx.Offsets), len(segs[0].idx.Times)
		for len(g) < len(segs) {
			n := segs[len(g)]
			if size+n.size > l.cfg.SegmentBytes ||
				(offs+len(n.idx.Offsets))*index.OffsetEntrySize > int(l.cfg.SegmentIndexBytes) ||
				(times+len(n.idx.Times))*index.TimeEntrySize > int(l.cfg.SegmentIndexBytes) ||
				n.nextOffset-1-g[0].base > math.MaxInt32 {
				break
			}
			size, offs, times = size+n.size, offs+len(n.idx.Offsets), times+len(n.idx.Times)
			g = segs[:len(g)+1]
		}
		groups = append(groups, g)
		segs = segs[len(g):]
	}
	return groups
}

// RunCleaner calls Clean every interval until ctx ends, as Kafka's cleaner
// thread does; a failed pass is logged and retried at the next tick. It
// returns nil when ctx ends.
func (l *Log) RunCleaner(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := l.Clean(); err != nil && l.logger != nil {
				l.logger.Warn("log cleaner pass failed", "dir", l.dir, "err", err)
			}
		}
	}
}
