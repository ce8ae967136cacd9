package seglog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
)

// Record is one record to append or read back. A zero Timestamp is
// replaced by the current time on Append, as a producer does for an unset
// timestamp.
type Record = batch.Record

// RecordHeader is one record header.
type RecordHeader = batch.RecordHeader

// Errors returned by Log. ErrNoKey: Append, AppendBatch or
// AppendTransactional to a log whose cleanup.policy includes compact, with a
// record whose key is null.
var (
	ErrClosed           = errors.New("seglog: log closed")
	ErrRecordTooLarge   = errors.New("seglog: batch larger than max.message.bytes")
	ErrNoRecords        = errors.New("seglog: no records to append")
	ErrNoTimestampFound = errors.New("seglog: no record with a timestamp at or after the target")
	ErrNoKey            = errors.New("seglog: a compacted log does not accept a record without a key")
)

// OffsetOutOfRangeError is returned by Read for an offset outside
// [Start, End]: Start is the log start offset, End the high watermark.
type OffsetOutOfRangeError struct {
	Offset, Start, End int64
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("seglog: offset %d out of range [%d, %d]", e.Offset, e.Start, e.End)
}

// Option sets an optional collaborator of a Log.
type Option func(*Log)

// WithClock replaces time.Now (for tests of segment.ms).
func WithClock(now func() time.Time) Option { return func(l *Log) { l.now = now } }

// WithLogger sets the logger for recovery warnings; the default is silent.
func WithLogger(lg *slog.Logger) Option { return func(l *Log) { l.logger = lg } }

// Log is one partition directory, "<topic>-<partition>", kept as a broker
// keeps it: segments named by base offset, each a .log of v2 record batches
// with a sparse .index and .timeindex, and a leader-epoch-checkpoint. Append
// is serialised; Read and OffsetForTimestamp run concurrently with it and
// with each other. The directory must not be written by anyone else while
// the Log is open.
type Log struct {
	dir    string
	cfg    Config
	now    func() time.Time
	logger *slog.Logger
	comp   batch.Compressor // compression.type's codecs at the configured levels

	// cleanMu serialises Clean calls (clean.go); swapPending is set when a
	// swap failed past its commit point and Open must finish it.
	cleanMu sync.Mutex
	// latestDeleteHorizon is the last pass's CleanStats.LatestDeleteHorizonMs
	// (0: none known; in memory only, as Kafka's UnifiedLog keeps it).
	latestDeleteHorizon int64
	swapPending         error
	txnScan             openTxnScan // the log's open transactions, for Clean

	mu     sync.RWMutex
	segs   []*segment // ascending base offset; the last is active
	epochs []epoch.Entry
	closed bool
	buf    []byte
	// producers are the transactional producers seen since Open (see
	// txn.go).
	producers map[int64]*producerState

	remote      RemoteReader
	lastRefresh int64 // unix ns of the last directory check
	dirMtime    int64 // unix ns
}

// Open opens or creates the partition directory dir. An existing log is
// recovered: see the package doc. It returns the config's Validate error, an
// I/O error, or a corruption error (wrapping kafkalog.ErrCorrupt) for a
// rolled segment that cannot be read.
func Open(dir string, cfg Config, opts ...Option) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, now: time.Now}
	for _, o := range opts {
		o(l)
	}
	var err error
	if l.comp, err = codec.NewCompressor(cfg.levels()); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if l.epochs, err = epoch.ReadFile(epoch.Path(dir)); err != nil {
		return nil, err
	}
	if err := l.load(); err != nil {
		l.closeSegments()
		return nil, err
	}
	if err := l.truncateEpochs(); err != nil {
		l.closeSegments()
		return nil, err
	}
	if n := len(l.epochs); n > 0 && l.epochs[n-1].Epoch > l.cfg.LeaderEpoch {
		l.cfg.LeaderEpoch = l.epochs[n-1].Epoch
	}
	if len(l.segs) == 0 {
		if err := l.newSegment(0); err != nil {
			return nil, err
		}
		if err := l.dropStaleCleanerCheckpoint(); err != nil {
			l.closeSegments()
			return nil, err
		}
	}
	return l, nil
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// newSegment creates an empty active segment at base and fsyncs the dir.
func (l *Log) newSegment(base int64) error {
	path := kafkalog.FileName(base, kafkalog.LogSuffix)
	f, err := os.OpenFile(l.dir+string(os.PathSeparator)+path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	s := l.newSegmentState(base)
	s.log = f
	if err := s.openIndexes(l.cfg.SegmentIndexBytes); err != nil {
		s.close()
		return err
	}
	l.segs = append(l.segs, s)
	return kafkalog.SyncDir(l.dir)
}

// Append writes records as one v2 batch at the end of the log,
// uncompressed unless compression.type names a codec, rolling first when the batch would take the active segment past
// segment.bytes, when segment.ms has passed, or when an index is full. It
// returns the offset of the first record. Errors: ErrNoRecords,
// ErrRecordTooLarge, ErrNoKey (a record without a key in a compacted
// log), ErrClosed, or an I/O error (the log is left as it was). Read's
// batches decode with DecodeRecords.
func (l *Log) Append(recs ...Record) (int64, error) {
	return l.AppendBatch(batch.CodecNone, recs...)
}

// AppendBatch is Append with the producer's compression codec for the
// batch: the batch is written with it when compression.type is producer,
// else with the topic's codec (see Config.CompressionType). With
// message.timestamp.type LogAppendTime the batch's max timestamp is the
// append time (ms) and readers see that time for every record. Errors as
// Append.
func (l *Log) AppendBatch(c batch.Codec, recs ...Record) (int64, error) {
	return l.appendWith(c, nil, recs)
}

// appendWith appends recs as one batch whose header set adjusts (nil: a
// plain batch), after the base offset and codec are set.
func (l *Log) appendWith(c batch.Codec, set func(*batch.Params), recs []Record) (int64, error) {
	if len(recs) == 0 {
		return 0, ErrNoRecords
	}
	if l.cfg.Compact() {
		// Kafka's LogValidator.validateKey: the cleaner drops keyless
		// records, so a compacted log refuses them up front.
		for i, r := range recs {
			if r.Key == nil {
				return 0, fmt.Errorf("%w (record %d of %d)", ErrNoKey, i, len(recs))
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	nowMs := l.now().UnixMilli()
	stamped := make([]Record, len(recs))
	for i, r := range recs {
		if r.Timestamp == 0 {
			r.Timestamp = nowMs
		}
		stamped[i] = r
	}
	act := l.active()
	p := batch.NewParams(act.nextOffset, l.cfg.LeaderEpoch)
	if set != nil {
		set(&p)
	}
	p.Codec = l.cfg.batchCodec(c, p.Control)
	if l.cfg.logAppendTime() {
		p.TimestampType = batch.LogAppendTime
	}
	buf, err := batch.AppendBatch(l.buf[:0], p, stamped, l.comp)
	if err != nil {
		return 0, err
	}
	l.buf = buf
	if l.cfg.logAppendTime() {
		if err := batch.SetMaxTimestamp(buf, batch.LogAppendTime, nowMs); err != nil {
			return 0, err
		}
	}
	if len(buf) > int(l.cfg.MaxMessageBytes) || int64(len(buf)) > l.cfg.SegmentBytes {
		return 0, fmt.Errorf("%w: %d bytes (max.message.bytes %d, segment.bytes %d)", ErrRecordTooLarge, len(buf), l.cfg.MaxMessageBytes, l.cfg.SegmentBytes)
	}
	b, err := batch.ParseHeader(buf, 0)
	if err != nil {
		return 0, err
	}
	if l.shouldRoll(act, b, int64(len(buf)), nowMs) {
		// The new segment starts at the batch's base offset, so the
		// encoded batch stays as it is.
		if err := l.rollLocked(); err != nil {
			return 0, err
		}
		act = l.active()
	}
	return b.BaseOffset, l.write(act, b, buf)
}

// shouldRoll applies Kafka's roll rules (LogSegment.shouldRoll) with no
// jitter.
func (l *Log) shouldRoll(s *segment, b batch.Batch, size int64, nowMs int64) bool {
	if s.size == 0 {
		return false
	}
	waited := nowMs - s.createdMs
	if s.firstBatchTimestamp >= 0 {
		waited = b.MaxTimestamp - s.firstBatchTimestamp
	}
	return waited > l.cfg.SegmentMs ||
		s.size > l.cfg.SegmentBytes-size ||
		s.offIndexFull() || s.timeIndexFull() ||
		b.LastOffset-s.base > 1<<31-1
}

// write appends one encoded batch to the active segment and its indexes.
func (l *Log) write(s *segment, b batch.Batch, buf []byte) error {
	pos := s.size
	if err := l.maybeNewEpoch(b.BaseOffset); err != nil {
		return err
	}
	if _, err := s.log.WriteAt(buf, pos); err != nil {
		_ = s.log.Truncate(pos)
		return fmt.Errorf("append to %s: %w", s.path(kafkalog.LogSuffix), err)
	}
	off, tim := s.observe(b, pos)
	s.size += int64(len(buf))
	return s.writeIndexEntries(off, tim)
}

// truncateEpochs drops checkpoint entries at or past the log end, as a
// broker does after recovery cut the log (LeaderEpochFileCache.truncateFromEnd).
func (l *Log) truncateEpochs() error {
	end := int64(0)
	if len(l.segs) > 0 {
		end = l.active().nextOffset
	}
	keep := len(l.epochs)
	for keep > 0 && l.epochs[keep-1].StartOffset >= end {
		keep--
	}
	if keep == len(l.epochs) {
		return nil
	}
	l.epochs = l.epochs[:keep]
	return epoch.WriteFile(epoch.Path(l.dir), l.epochs)
}

// maybeNewEpoch records the configured leader epoch in the checkpoint the
// first time a batch is written in it.
func (l *Log) maybeNewEpoch(start int64) error {
	if n := len(l.epochs); n > 0 && l.epochs[n-1].Epoch >= l.cfg.LeaderEpoch {
		return nil
	}
	next := append(append([]epoch.Entry(nil), l.epochs...), epoch.Entry{Epoch: l.cfg.LeaderEpoch, StartOffset: start})
	if err := epoch.WriteFile(epoch.Path(l.dir), next); err != nil {
		return fmt.Errorf("write leader epoch checkpoint: %w", err)
	}
	l.epochs = next
	return nil
}

// Roll closes the active segment and starts a new one at the high
// watermark, as a broker does when a roll rule fires. Rolling an empty
// active segment does nothing.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.active().size == 0 {
		return nil
	}
	return l.rollLocked()
}

func (l *Log) rollLocked() error {
	act := l.active()
	if err := act.seal(); err != nil {
		return fmt.Errorf("roll %s: %w", act.path(kafkalog.LogSuffix), err)
	}
	if err := l.newSegment(act.nextOffset); err != nil {
		// Keep appending to the old segment: reopen its indexes.
		if rerr := act.openIndexes(l.cfg.SegmentIndexBytes); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// Flush fsyncs the active segment's log.
func (l *Log) Flush() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.active().log.Sync()
}

// Close seals the active segment (trimmed indexes, fsync) as a broker does
// on clean shutdown, and closes every file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.active().seal()
	return errors.Join(err, l.closeSegments())
}

func (l *Log) closeSegments() error {
	var errs []error
	for _, s := range l.segs {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

// LogStartOffset returns the first offset of the log. Without a remote
// reader that is the base offset of the oldest segment; with one, see
// LogStartOffsetContext (this calls it with a 10 s timeout and falls back to
// the local log start offset when the remote tier does not answer).
func (l *Log) LogStartOffset() int64 {
	if l.remote != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if off, err := l.LogStartOffsetContext(ctx); err == nil {
			return off
		}
	}
	return l.LocalLogStartOffset()
}

// HighWatermark returns the offset the next record will get (the log end
// offset; a single-replica log has its high watermark there).
func (l *Log) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().nextOffset
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset   int64 // from the file name
	NextOffset   int64 // one past the last offset the segment may hold
	Size         int64 // bytes of the .log
	MaxTimestamp int64 // ms; -1 when no batch has a timestamp
	Active       bool
}

// Segments lists the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegmentInfo{BaseOffset: s.base, NextOffset: s.nextOffset, Size: s.size,
			MaxTimestamp: s.maxTimestamp(), Active: i == len(l.segs)-1}
	}
	return out
}

// EpochEntry is one leader-epoch-checkpoint line: Epoch began at StartOffset.
type EpochEntry = epoch.Entry

// LeaderEpochs returns the leader-epoch-checkpoint entries.
func (l *Log) LeaderEpochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]epoch.Entry(nil), l.epochs...)
}
