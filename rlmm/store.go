package rlmm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/remotelog"
)

// Errors of the store.
var (
	ErrSegmentNotFound = errors.New("rlmm: segment not found")
	ErrSegmentExists   = errors.New("rlmm: segment already exists")
	ErrClosed          = errors.New("rlmm: store closed")
)

// Config configures the store.
type Config struct {
	// Dir is the Pebble directory. Required.
	Dir string `yaml:"dir"`
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("rlmm: dir is required")
	}
	return nil
}

// Option sets an optional collaborator.
type Option func(*Store)

// WithFS replaces the filesystem (vfs.NewMem() in unit tests).
func WithFS(fs vfs.FS) Option { return func(s *Store) { s.fs = fs } }

// WithRegisterer registers the store's metrics.
func WithRegisterer(r prometheus.Registerer) Option { return func(s *Store) { s.reg = r } }

// WithLogger sends Pebble's messages to l: info at debug level, errors at
// error level (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithClock replaces time.Now for event timestamps.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// Store keeps RemoteLogSegmentMetadata rows and per-partition offsets in
// Pebble. Every write is synced before it returns. Methods are safe for
// concurrent use; state changes are serialised so that each transition is
// checked against the state it replaces.
type Store struct {
	db  *pebble.DB
	fs  vfs.FS
	reg prometheus.Registerer
	now func() time.Time
	log *slog.Logger
	mu  sync.Mutex // serialises read-modify-write

	transitions *prometheus.CounterVec
}

// Open opens (creating) the store.
func Open(cfg Config, opts ...Option) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{fs: vfs.Default, now: time.Now, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.transitions = promauto.With(s.reg).NewCounterVec(prometheus.CounterOpts{
		Name: "tierd_rlmm_segment_transitions_total",
		Help: "Remote log segment metadata rows written, by the state they entered.",
	}, []string{"state"})
	for st := remotelog.CopySegmentStarted; st <= remotelog.DeleteSegmentFinished; st++ {
		s.transitions.WithLabelValues(st.String())
	}
	db, err := pebble.Open(cfg.Dir, &pebble.Options{FS: s.fs, Logger: pebbleLogger{s.log}})
	if err != nil {
		return nil, fmt.Errorf("rlmm: open %s: %w", cfg.Dir, err)
	}
	s.db = db
	return s, nil
}

// pebbleLogger adapts slog to Pebble's logger. Fatalf must not return.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// AddSegment writes a new row, which must be in COPY_SEGMENT_STARTED (the
// first state of every copy) and must not exist yet.
func (s *Store) AddSegment(meta remotelog.SegmentMetadata) error {
	if meta.State != remotelog.CopySegmentStarted {
		return fmt.Errorf("rlmm: new segment in state %s: %w", meta.State, remotelog.ErrIllegalTransition)
	}
	if meta.EndOffset < meta.StartOffset || meta.StartOffset < 0 {
		return fmt.Errorf("rlmm: segment range [%d, %d] is empty", meta.StartOffset, meta.EndOffset)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := segmentKey(meta.TopicPartition, meta.StartOffset, meta.ID)
	if _, err := s.get(k); err == nil {
		return fmt.Errorf("%w: %s %s", ErrSegmentExists, meta.TopicPartition, meta.ID)
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	meta.EventTimestampMs = s.now().UnixMilli()
	b := s.db.NewBatch()
	defer b.Close()
	if err := putJSON(b, k, meta); err != nil {
		return err
	}
	if err := s.ensurePartition(b, meta.TopicPartition, meta.StartOffset); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	s.transitions.WithLabelValues(meta.State.String()).Inc()
	return nil
}

// UpdateState moves a row to state to, after checking the transition (see
// remotelog.CheckTransition). Entering COPY_SEGMENT_FINISHED also raises
// the partition's highest tiered offset, in the same synced write.
func (s *Store) UpdateState(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, to remotelog.SegmentState) (remotelog.SegmentMetadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := segmentKey(tp, start, id)
	meta, err := s.segment(k)
	if err != nil {
		return meta, err
	}
	if err := remotelog.CheckTransition(meta.State, to); err != nil {
		return meta, fmt.Errorf("%s segment %s: %w", tp, id, err)
	}
	meta.State, meta.EventTimestampMs = to, s.now().UnixMilli()
	b := s.db.NewBatch()
	defer b.Close()
	if err := putJSON(b, k, meta); err != nil {
		return meta, err
	}
	if to == remotelog.CopySegmentFinished {
		off, _, err := s.offsets(tp)
		if err != nil {
			return meta, err
		}
		off.HighestTieredOffset = max(off.HighestTieredOffset, meta.EndOffset)
		if err := putJSON(b, partitionKey(tp), off); err != nil {
			return meta, err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return meta, err
	}
	s.transitions.WithLabelValues(to.String()).Inc()
	return meta, nil
}

// Segment returns one row.
func (s *Store) Segment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error) {
	return s.segment(segmentKey(tp, start, id))
}

func (s *Store) segment(k []byte) (remotelog.SegmentMetadata, error) {
	var meta remotelog.SegmentMetadata
	v, err := s.get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return meta, ErrSegmentNotFound
	}
	if err != nil {
		return meta, err
	}
	if err := json.Unmarshal(v, &meta); err != nil {
		return meta, fmt.Errorf("rlmm: decode row: %w", err)
	}
	return meta, nil
}

// Segments returns every row of a partition, in any state, ordered by start
// offset (then segment id).
func (s *Store) Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	prefix := segmentPrefix(tp)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: successor(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []remotelog.SegmentMetadata
	for it.First(); it.Valid(); it.Next() {
		var meta remotelog.SegmentMetadata
		if err := json.Unmarshal(it.Value(), &meta); err != nil {
			return nil, fmt.Errorf("rlmm: decode row: %w", err)
		}
		out = append(out, meta)
	}
	return out, it.Error()
}

// FinishedSegments returns the COPY_SEGMENT_FINISHED rows a reader should
// use, ordered by start offset: a row whose offsets a newer finished copy
// covers entirely is superseded and left out (see Supersede).
func (s *Store) FinishedSegments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	all, err := s.Segments(tp)
	if err != nil {
		return nil, err
	}
	var fin []remotelog.SegmentMetadata
	for _, m := range all {
		if m.State == remotelog.CopySegmentFinished {
			fin = append(fin, m)
		}
	}
	return Supersede(fin), nil
}

// Supersede drops, from finished rows, each one whose whole range a newer
// row (later event timestamp, then larger id) covers, and returns the rest
// ordered by start offset. Partly overlapping rows are both kept: they hold
// the same offsets of the same log.
func Supersede(fin []remotelog.SegmentMetadata) []remotelog.SegmentMetadata {
	byAge := append([]remotelog.SegmentMetadata(nil), fin...)
	sort.Slice(byAge, func(i, j int) bool {
		if byAge[i].EventTimestampMs != byAge[j].EventTimestampMs {
			return byAge[i].EventTimestampMs > byAge[j].EventTimestampMs
		}
		return bytes.Compare(byAge[i].ID[:], byAge[j].ID[:]) > 0
	})
	var kept []remotelog.SegmentMetadata
	for _, m := range byAge {
		superseded := false
		for _, k := range kept {
			if k.StartOffset <= m.StartOffset && k.EndOffset >= m.EndOffset {
				superseded = true
				break
			}
		}
		if !superseded {
			kept = append(kept, m)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].StartOffset < kept[j].StartOffset })
	return kept
}

// Partitions lists the partitions that have offsets recorded.
func (s *Store) Partitions() ([]remotelog.TopicPartition, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{partitionTag}, UpperBound: []byte{partitionTag + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []remotelog.TopicPartition
	for it.First(); it.Valid(); it.Next() {
		tp, err := decodeTP(it.Key()[1:])
		if err != nil {
			return nil, err
		}
		out = append(out, tp)
	}
	return out, it.Error()
}

// Offsets returns a partition's offsets, and false when nothing is recorded
// for it (then the log start offset is 0 and nothing is tiered).
func (s *Store) Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	return s.offsets(tp)
}

func (s *Store) offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	off := remotelog.PartitionOffsets{HighestTieredOffset: -1}
	v, err := s.get(partitionKey(tp))
	if errors.Is(err, pebble.ErrNotFound) {
		return off, false, nil
	}
	if err != nil {
		return off, false, err
	}
	if err := json.Unmarshal(v, &off); err != nil {
		return off, false, fmt.Errorf("rlmm: decode offsets: %w", err)
	}
	return off, true, nil
}

// EnsurePartition records a partition first seen with its first local
// offset as log start offset; an existing record is left alone.
func (s *Store) EnsurePartition(tp remotelog.TopicPartition, logStartOffset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.ensurePartition(b, tp, logStartOffset); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

func (s *Store) ensurePartition(b *pebble.Batch, tp remotelog.TopicPartition, lso int64) error {
	_, ok, err := s.offsets(tp)
	if err != nil || ok {
		return err
	}
	return putJSON(b, partitionKey(tp), remotelog.PartitionOffsets{LogStartOffset: lso, HighestTieredOffset: -1, LocalLogStartOffset: lso})
}

// AdvanceOffsets raises the log start offset and the local log start offset
// of a partition to at least the given values (-1 leaves one unchanged);
// they never move back. The write is synced, so callers may delete data
// below the new offsets once it returns.
func (s *Store) AdvanceOffsets(tp remotelog.TopicPartition, logStart, localLogStart int64) (remotelog.PartitionOffsets, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, _, err := s.offsets(tp)
	if err != nil {
		return off, err
	}
	off.LogStartOffset = max(off.LogStartOffset, logStart)
	off.LocalLogStartOffset = max(off.LocalLogStartOffset, localLogStart, off.LogStartOffset)
	b := s.db.NewBatch()
	defer b.Close()
	if err := putJSON(b, partitionKey(tp), off); err != nil {
		return off, err
	}
	return off, b.Commit(pebble.Sync)
}

func (s *Store) get(k []byte) ([]byte, error) {
	v, closer, err := s.db.Get(k)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

func putJSON(b *pebble.Batch, k []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Set(k, data, nil)
}

// Key layout (big-endian, so scans come out ordered by partition, then
// start offset):
//
//	's' topic 0x00 partition(4) startOffset(8) segmentID(16) -> SegmentMetadata JSON
//	'p' topic 0x00 partition(4)                             -> PartitionOffsets JSON
const (
	segmentTag   = 's'
	partitionTag = 'p'
)

func tpBytes(dst []byte, tp remotelog.TopicPartition) []byte {
	dst = append(dst, tp.Topic...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint32(dst, uint32(tp.Partition))
}

func segmentPrefix(tp remotelog.TopicPartition) []byte { return tpBytes([]byte{segmentTag}, tp) }

func segmentKey(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) []byte {
	k := binary.BigEndian.AppendUint64(segmentPrefix(tp), uint64(start))
	return append(k, id[:]...)
}

func partitionKey(tp remotelog.TopicPartition) []byte { return tpBytes([]byte{partitionTag}, tp) }

func decodeTP(b []byte) (remotelog.TopicPartition, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 || len(b) != i+5 {
		return remotelog.TopicPartition{}, fmt.Errorf("rlmm: bad partition key %q", b)
	}
	return remotelog.TopicPartition{Topic: string(b[:i]), Partition: int32(binary.BigEndian.Uint32(b[i+1:]))}, nil
}

// successor returns the smallest key greater than every key with prefix p.
func successor(p []byte) []byte {
	out := append([]byte(nil), p...)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] != 0xff {
			out[i]++
			return out[:i+1]
		}
	}
	return nil
}
