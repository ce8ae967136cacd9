package copier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// errFencedAfterManifest marks a copy whose manifest was written and whose
// leader epoch a newer leader fenced meanwhile: the new leader may have
// taken it in, so this tierd leaves its objects alone.
var errFencedAfterManifest = errors.New("copier: fenced after the manifest was written")

// covered reports whether a finished row covers the whole local segment.
func covered(fin []remotelog.SegmentMetadata, s localSegment) bool {
	for _, r := range fin {
		if r.StartOffset <= s.base && r.EndOffset >= s.end {
			return true
		}
	}
	return false
}

// copyRolled copies, oldest first, every rolled segment without a finished
// copy that is committed (below the high watermark when the log dir has a
// replication-offset-checkpoint), not below the log start offset, and,
// for a compacted topic, cleaned (below the cleaner checkpoint, see
// compacted.go). It stops at the first failure or uncleaned segment so
// the tiered offsets stay contiguous.
func (c *Copier) copyRolled(ctx context.Context, p *partition) (int, error) {
	fin, err := c.store.FinishedSegments(p.tp)
	if err != nil {
		return 0, err
	}
	offs, _, err := c.store.Offsets(p.tp)
	if err != nil {
		return 0, err
	}
	highest := offs.HighestTieredOffset
	copied := 0
	for _, s := range p.segs {
		if s.active() || (p.hwKnown && s.end >= p.hw) {
			break
		}
		if s.end < offs.LogStartOffset {
			continue
		}
		if damagedExactly(fin, s) || (p.policy.Compact && (p.damagedCompacted(fin, s) || p.damagedTail(fin, s))) {
			if c.once(fmt.Sprintf("recopy %s %d", p.tp, s.base)) {
				c.log.Warn("copying a segment again: its copy is damaged", "partition", p.tp, "base_offset", s.base)
			}
		} else if covered(fin, s) || s.end <= highest {
			if s.base >= offs.LogStartOffset && !copiedExactly(fin, s) {
				if p.cleanedCover(fin, s) != nil {
					c.noteRecleaned(p.tp, s) // the cleaner rewrote it: not a mismatch
				} else {
					c.reportMismatch(p, s)
				}
			}
			continue
		}
		if p.policy.Compact && !p.cleanedThrough(s) {
			break // the status says why (not_cleaned)
		}
		from, ok, err := c.copyStart(ctx, p, fin, s, highest)
		if err != nil || !ok {
			return copied, err
		}
		if highest >= 0 && s.base > highest+1 && highest+1 >= offs.LogStartOffset {
			c.reportGap(p.tp, highest+1, s.base-1)
		}
		if err := ctx.Err(); err != nil {
			return copied, err
		}
		// Renew the lease before each copy, so that a long backlog cannot
		// outlive it.
		if own, err := c.renew(ctx, p); err != nil || !own {
			return copied, err
		}
		if err := c.copyOne(ctx, p, s, from); errors.Is(err, errCleanerBusy) {
			c.wait(p.tp, remotelog.WaitNotCleaned, fmt.Sprintf("cleanup.policy=%s: segment %d waits for the next pass: %v", p.policy, s.base, err))
			return copied, nil
		} else if errors.Is(err, errStraddle) || errors.Is(err, errEmptyTail) {
			c.waitTail(p, s, from, err)
			return copied, nil
		} else if err != nil {
			return copied, fmt.Errorf("copy segment %d: %w", s.base, err)
		}
		copied++
		highest = max(highest, s.end)
	}
	return copied, nil
}

// reportGap logs and counts offsets that vanished locally before they were
// copied (a broker's own retention ran ahead of tierd).
func (c *Copier) reportGap(tp remotelog.TopicPartition, from, to int64) {
	if !c.once(fmt.Sprintf("gap %s %d %d", tp, from, to)) {
		return
	}
	c.m.gaps.Inc()
	c.log.Error("offsets were deleted locally before tierd copied them", "partition", tp, "from", from, "to", to)
}

// copyOne copies one rolled segment: stage its files by hard link, check
// the log (CRC, offsets) and its indexes (rebuilding them when unusable),
// record COPY_SEGMENT_STARTED, upload under a deadline, record
// COPY_SEGMENT_FINISHED. A failed upload's objects are deleted, its
// incomplete multipart uploads aborted by exact key, and its row ends in
// DELETE_SEGMENT_FINISHED (or, when the store does not answer, stays in
// DELETE_SEGMENT_STARTED for the next passes to finish); the next pass
// retries the copy with a new id.
// from is the first offset to copy: s.base, or for a partly tiered
// segment of a compacted topic the offset after the tiered ones, when
// only its tail is copied (tailcopy.go; errStraddle, errEmptyTail).
func (c *Copier) copyOne(ctx context.Context, p *partition, s localSegment, from int64) error {
	id := remotelog.NewSegmentID()
	st, err := stageSettled(p, s, id)
	defer func() {
		if st == nil { // nothing was staged
			return
		}
		os.RemoveAll(st.dir)
		os.Remove(filepath.Dir(st.dir)) // the staging root, when empty
	}()
	if err != nil {
		return err
	}
	cs, in := s, inspection{} // cs: the offsets copied
	if from > s.base {
		cs.base = from
		err = st.cutTail(s, from)
	}
	if err == nil {
		in, err = inspect(cs, st, c.cfg.IndexIntervalBytes)
	}
	if err != nil {
		if errors.Is(err, errCorruptSegment) {
			c.reportCorrupt(p.tp, s, err)
		}
		return err
	}
	if cs.base == s.base {
		c.setMaxTimestamp(s, in.maxTimestamp) // a tail's is not the segment's
	}
	if cs.base > s.base {
		// A tail copy's indexes are always built from its own .log.
		if err := st.replaceIndexes(cs.base, in.rebuilt); err != nil {
			return err
		}
	} else if !in.indexesOK {
		c.log.Warn("segment indexes unusable; uploading indexes rebuilt from the log", "partition", p.tp, "base_offset", s.base,
			"check_failed", in.indexProblem)
		c.m.indexesRebuilt.Inc()
		if err := st.replaceIndexes(s.base, in.rebuilt); err != nil {
			return err
		}
	}
	epochs, err := epoch.ReadFile(epoch.Path(p.dir))
	if err != nil {
		return err
	}
	files := rsm.SegmentFiles{Log: st.log, OffsetIndex: st.offsetIdx, TimeIndex: st.timeIdx,
		TxnIndex: st.txnIdx, ProducerSnapshot: st.producerSnapshot, LeaderEpochs: epoch.InRange(epochs, cs.base, s.end), Throttle: c.throttle}
	meta := remotelog.SegmentMetadata{
		TopicPartition: p.tp, TopicID: p.topicID, ID: id, StartOffset: cs.base, EndOffset: s.end,
		MaxTimestampMs: in.maxTimestamp, SizeInBytes: in.size, State: remotelog.CopySegmentStarted, BrokerID: c.cfg.BrokerID, InstanceID: c.cfg.InstanceID,
		SegmentLeaderEpochs: files.LeaderEpochs, TxnIndexPresent: files.TxnIndex != "", ProducerSnapshotPresent: files.ProducerSnapshot != "",
		Compacted: p.policy.Compact, Form: c.rs.NewCopyForm(),
	}
	if in.size < in.fileSize && cs.base == s.base {
		meta.LocalSizeInBytes = in.fileSize // the copy leaves out the zero tail
		c.reportTrimmed(p.tp, s, in)
	}
	if p.leaderEpoch >= 0 {
		// Made under this leader epoch: committed only while no newer
		// leader has raised the partition's fence.
		le := p.leaderEpoch
		meta.CopyLeaderEpoch = &le
		files.BeforeManifest = func(ctx context.Context) error { return c.rs.CheckFence(ctx, p.tp, p.topicID, le) }
	}
	if err := c.store.AddSegment(meta); err != nil {
		return err
	}
	crashpoint.Hit("copy.started")
	inflight, done := c.rep.startCopy(p.tp, s, in.size)
	files.Progress = func(n int64) { inflight.sent.Store(n) }
	stop := c.rep.logProgress(p.tp, s, inflight)
	started := time.Now()
	made, err := c.upload(ctx, meta, files)
	stop()
	done()
	c.rep.countCopy(p.tp, in.size, time.Since(started), err)
	if err != nil {
		c.m.copyFailures.Inc()
		if ctx.Err() != nil {
			c.log.Warn("shutting down: copy abandoned; its objects are removed and the segment is copied again after the restart", "partition", p.tp,
				"base_offset", s.base, "end_offset", s.end, "sent_bytes", inflight.sent.Load(), "bytes", in.size, "segment", meta.ID)
		}
		if errors.Is(err, errFencedAfterManifest) {
			return c.deletes().Abandon(meta, err)
		}
		c.needSweep(p.tp)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CopyTimeout)
		defer cancel()
		if derr := c.deletes().Discard(cctx, meta); derr != nil {
			err = errors.Join(err, fmt.Errorf("clean up failed copy (retried on the next passes): %w", derr))
		}
		return err
	}
	crashpoint.Hit("copy.uploaded")
	fin := meta
	fin.StoredSizeInBytes, fin.Encrypted = made.StoredSizeInBytes, made.Encrypted
	if _, err := c.store.UpdateStates(p.tp, []remotelog.SegmentMetadata{fin}, remotelog.CopySegmentFinished); err != nil {
		return err
	}
	crashpoint.Hit("copy.finished")
	c.m.copied.Inc()
	c.m.copiedBytes.Add(float64(in.size))
	if cs.base > s.base {
		c.m.tailCopies.Inc()
	}
	c.log.Info("copied segment", "partition", p.tp, "base_offset", s.base, "start_offset", cs.base, "end_offset", s.end, "bytes", in.size, "segment", meta.ID)
	return nil
}

// upload runs one copy attempt under CopyTimeout, then checks that every
// object is stored whole; a panic in the upload path becomes an error. It
// returns the finished row the manifest written stands for (whose
// StoredSizeInBytes and Encrypted the FINISHED row records).
func (c *Copier) upload(ctx context.Context, meta remotelog.SegmentMetadata, files rsm.SegmentFiles) (made remotelog.SegmentMetadata, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CopyTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("copier: panic in upload of segment %d: %v", meta.StartOffset, r)
		}
	}()
	mf, err := c.rs.CopySegment(ctx, meta, files)
	if err == nil && meta.CopyLeaderEpoch != nil {
		// The manifest is written: the copy commits only if the fence
		// still allows its epoch now (a new leader raises it before it
		// lists the bucket).
		crashpoint.Hit("copy.manifest-written")
		if err = c.rs.CheckFence(ctx, meta.TopicPartition, meta.TopicID, *meta.CopyLeaderEpoch); errors.Is(err, rsm.ErrFenced) {
			err = fmt.Errorf("%w: %w", errFencedAfterManifest, err)
		}
	}
	if errors.Is(err, rsm.ErrFenced) {
		c.m.fenced.Inc()
		c.log.Warn("copy made under an older leader epoch is not committed: another broker leads the partition now",
			"partition", meta.TopicPartition, "base_offset", meta.StartOffset, "err", err)
	}
	if err != nil {
		return made, err
	}
	return mf.Metadata(), c.rs.VerifyPresent(ctx, mf)
}

// reportMismatch logs and counts, once, a local segment whose offsets are
// tiered by a copy of different contents (a log rewritten after its copy,
// or a topic re-created without topic ids). It stays local. When the log
// dir's cleaner-offset-checkpoint has an entry for the partition while its
// cleanup.policy (as tierd resolved it) lacks compact, the log line says
// so: a log cleaner rewrites the partition, and tierd was not told it is
// compacted.
func (c *Copier) reportMismatch(p *partition, s localSegment) {
	if c.once(fmt.Sprintf("mismatch %s %d %d", p.tp, s.base, s.size)) {
		c.m.mismatch.Inc()
		args := []any{"partition", p.tp, "base_offset", s.base, "bytes", s.size}
		if p.cleaner.has && !p.policy.Compact {
			args = append(args, "hint", fmt.Sprintf("the log dir's cleaner-offset-checkpoint has an entry for this partition (first dirty offset %d): "+
				"the broker's log cleaner compacts it, but its cleanup.policy here is %s; set cleanup.policy: compact for the topic "+
				"(topics.<topic>.cleanup.policy or log.cleanup.policy in tierd.yaml, or the cluster's topic config) and reload", p.cleaner.firstDirty, p.policy))
		}
		c.log.Error("local segment differs from the tiered copy of its offsets; it is kept locally", args...)
	}
}

// reportCorrupt logs and counts a segment that fails its checks, once.
func (c *Copier) reportCorrupt(tp remotelog.TopicPartition, s localSegment, err error) {
	if c.once(fmt.Sprintf("corrupt %s %d", tp, s.base)) {
		c.m.corrupt.Inc()
		c.log.Error("segment is corrupt: not copied, kept locally; tiering of the partition waits", "partition", tp, "base_offset", s.base, "err", err)
	}
}

// reportTrimmed logs and counts, once, a segment whose .log ends in zero
// bytes after its last batch (the broker preallocated it): the copy holds
// the batches only.
func (c *Copier) reportTrimmed(tp remotelog.TopicPartition, s localSegment, in inspection) {
	if c.once(fmt.Sprintf("trimmed %s %d", tp, s.base)) {
		c.m.trimmedTails.Inc()
		c.log.Warn("segment ends in zero bytes after its last batch (a preallocated .log); copying the batches only",
			"partition", tp, "base_offset", s.base, "valid_bytes", in.size, "file_bytes", in.fileSize)
	}
}

// maxTimestamp returns a rolled segment's largest batch timestamp: the last
// time index entry (a broker adds one for the max when it rolls), or a scan
// of the batch headers when the index has none. -1 when no batch has a
// timestamp. Results are cached by file and size.
func (c *Copier) maxTimestamp(s localSegment) (int64, error) {
	if ts, ok := c.cachedMaxTimestamp(s); ok {
		return ts, nil
	}
	ts := batch.NoTimestamp
	if raw, err := os.ReadFile(s.file(kafkalog.TimeIndexSuffix)); err == nil {
		if es, err := index.ParseTimeIndex(raw, s.base); err == nil && len(es) > 0 {
			ts = es[len(es)-1].Timestamp
		}
	}
	if ts < 0 {
		f, err := os.Open(s.path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		sc := batch.NewScanner(f, s.size, batch.ScanOptions{})
		for sc.Next() {
			ts = max(ts, sc.Batch().MaxTimestamp)
		}
		if err := sc.Err(); err != nil {
			// Zero bytes after the last batch are a preallocated file's end.
			if nz, zerr := batch.FirstNonZero(f, sc.ValidEnd(), s.size); !errors.Is(err, kafkalog.ErrCorrupt) || zerr != nil || nz >= 0 {
				return 0, kafkalog.WithFile(err, s.path)
			}
		}
	}
	c.setMaxTimestamp(s, ts)
	return ts, nil
}

func timesKey(s localSegment) string { return fmt.Sprintf("%s:%d", s.path, s.size) }

// pruneTimes forgets the cached timestamps of a partition's segments that
// are gone, so the cache holds only live segments. It costs the
// partition's own segments only: the cache is kept per partition
// directory.
func (c *Copier) pruneTimes(p *partition) {
	live := make(map[string]bool, len(p.segs))
	for _, s := range p.segs {
		live[timesKey(s)] = true
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	for k := range c.times[p.dir] {
		if !live[k] {
			delete(c.times[p.dir], k)
		}
	}
	if len(c.times[p.dir]) == 0 {
		delete(c.times, p.dir)
	}
}

// pruneTimesOf forgets the cached timestamps of partition directories
// this pass did not find (removed or moved by the broker).
func (c *Copier) pruneTimesOf(parts []*partition) {
	seen := make(map[string]bool, len(parts))
	for _, p := range parts {
		seen[p.dir] = true
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	for dir := range c.times {
		if !seen[dir] {
			delete(c.times, dir)
		}
	}
}

func (c *Copier) cachedMaxTimestamp(s localSegment) (int64, bool) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	ts, ok := c.times[filepath.Dir(s.path)][timesKey(s)]
	return ts, ok
}

func (c *Copier) setMaxTimestamp(s localSegment, ts int64) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	dir := filepath.Dir(s.path)
	if c.times[dir] == nil {
		c.times[dir] = map[string]int64{}
	}
	c.times[dir][timesKey(s)] = ts
}

// forget drops the log-once keys starting with prefix, so the next
// occurrence is logged again (after the condition cleared). It walks
// every key: for rare events (a cluster that answers again), not for
// every partition of a pass, which use unwarn. Callers hold stateMu.
func (c *Copier) forget(prefix string) {
	for k := range c.warns {
		if strings.HasPrefix(k, prefix) {
			delete(c.warns, k)
		}
	}
}

// unwarn drops one log-once key, so its next occurrence is logged again.
func (c *Copier) unwarn(key string) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	delete(c.warns, key)
}

// once reports whether key is seen for the first time (for log-once).
func (c *Copier) once(key string) bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.warns[key] {
		return false
	}
	c.warns[key] = true
	return true
}
