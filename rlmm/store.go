package rlmm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
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
	// MinFreeBytes is the free space, bytes, below which the store
	// refuses writes (with a *DirError, until space returns) rather than
	// let Pebble meet a full disk, and refuses to open. Default 64 MiB
	// (DefaultConfig); 0 turns the check off: the write probe at open and
	// at each retry still reserves 4 MiB (probeReserve), and a write that
	// fails for space stops the store, retried with a backoff that grows
	// across outages (see stableFor).
	MinFreeBytes int64 `yaml:"min_free_bytes"`
}

// DefaultConfig returns the defaults; Dir has none.
func DefaultConfig() Config { return Config{MinFreeBytes: 64 << 20} }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("rlmm: dir is required"))
	}
	if c.MinFreeBytes < 0 {
		errs = append(errs, fmt.Errorf("rlmm: min_free_bytes %d must be 0 (off) or a size in bytes", c.MinFreeBytes))
	}
	return errors.Join(errs...)
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
	cfg  Config
	inst atomic.Pointer[instance] // the Pebble instance in use; replaced after a failure
	fs   vfs.FS
	reg  prometheus.Registerer
	now  func() time.Time
	log  *slog.Logger
	mu   sync.Mutex // serialises read-modify-write
	// brokerMu serialises the read-modify-writes of the broker-copy
	// catalogue (brokercopies.go), whose keys no other write touches.
	brokerMu sync.Mutex

	brokerTransitions *prometheus.CounterVec

	transitions *prometheus.CounterVec

	journalSeq int64 // the last journal entry's number; guarded by mu

	gen     atomic.Uint64 // bumped by every commit
	changes changeLog     // per-partition generations and recent changes (changes.go)

	syncedWrites prometheus.Counter

	failures prometheus.Counter
	spaceMu  sync.Mutex // guards the three below
	spaceAt  time.Time  // when free space was last checked
	spaceErr error      // its verdict
	spaceTTL time.Duration
	retryMin time.Duration
	dirID    dirIdentity // the directory opened (see dirGone)
	lifecycle
}

// db returns the Pebble instance in use, for new batches only (a batch is
// memory until commit copies it into the instance then in use). Reads
// take the instance with read, so that it is not closed under them.
func (s *Store) db() *pebble.DB { return s.inst.Load().db }

// Open opens (creating) the store; see OpenContext.
func Open(cfg Config, opts ...Option) (*Store, error) {
	return OpenContext(context.Background(), cfg, opts...)
}

// OpenContext opens (creating) the store. It first checks that the
// directory takes writes (a probe file written and synced) and has
// MinFreeBytes free, and returns at once when it does not, or when a
// write fails while Pebble opens, or when ctx ends. Errors: *DirError
// (wrapping ErrUnavailable and the cause: syscall.ENOSPC, syscall.EROFS,
// ...), Pebble's (wrapped; syscall.EAGAIN when another process holds the
// directory), ctx's (wrapped), a bad cfg.
func OpenContext(ctx context.Context, cfg Config, opts ...Option) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, fs: vfs.Default, now: time.Now, log: slog.New(slog.DiscardHandler),
		spaceTTL: time.Second, retryMin: retryMin}
	s.closing = make(chan struct{})
	for _, o := range opts {
		o(s)
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	f := promauto.With(s.reg)
	s.transitions = f.NewCounterVec(prometheus.CounterOpts{
		Name: "tierd_rlmm_segment_transitions_total",
		Help: "Remote log segment metadata rows written, by the state they entered.",
	}, []string{"state"})
	for st := remotelog.CopySegmentStarted; st <= remotelog.DeleteSegmentFinished; st++ {
		s.transitions.WithLabelValues(st.String())
	}
	s.brokerTransitions = f.NewCounterVec(prometheus.CounterOpts{
		Name: "tierd_rlmm_broker_copy_transitions_total",
		Help: "Rows of broker-owned copies (made through the RSM endpoint) written, by the state they entered.",
	}, []string{"state"})
	for st := remotelog.CopySegmentStarted; st <= remotelog.DeleteSegmentFinished; st++ {
		s.brokerTransitions.WithLabelValues(st.String())
	}
	s.failures = f.NewCounter(prometheus.CounterOpts{
		Name: "tierd_rlmm_write_failures_total",
		Help: "Times the metadata store stopped taking writes because its directory failed a write (full, read-only, I/O error).",
	})
	s.syncedWrites = f.NewCounter(prometheus.CounterOpts{
		Name: "tierd_rlmm_synced_writes_total",
		Help: "Synced writes (Pebble batch commits) of the metadata store, failed ones included; a write that would change nothing is not made.",
	})
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tierd_rlmm_writable",
		Help: "1 when the metadata store takes writes, 0 when its directory is full, read-only or failing.",
	}, func() float64 {
		if s.Health() != nil {
			return 0
		}
		return 1
	})
	if err := withContext(ctx, s.checkDir); err != nil {
		return nil, err
	}
	in, err := s.openInstance(ctx)
	if err != nil {
		return nil, err
	}
	if s.dirID, err = s.statDir(); err != nil {
		in.db.Close()
		return nil, &DirError{Dir: cfg.Dir, Err: err}
	}
	s.install(in)
	if err := s.migrate(); err != nil {
		s.Close()
		return nil, err
	}
	if s.journalSeq, err = s.lastJournalSeq(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// schemaKey holds the store's layout version. Version 2 added the 'f'
// family; stores without it get it backfilled from their rows.
var schemaKey = []byte("v")

const schemaVersion = "2"

func (s *Store) migrate() error {
	if v, err := s.get(schemaKey); err == nil && string(v) == schemaVersion {
		return nil
	} else if err != nil && !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	rows, err := s.scanRows([]byte{segmentTag})
	if err != nil {
		return err
	}
	b := s.db().NewBatch()
	defer b.Close()
	for _, r := range rows {
		if r.State == remotelog.CopySegmentFinished {
			if err := putJSON(b, finishedKey(r.TopicPartition, r.StartOffset, r.ID), r); err != nil {
				return err
			}
		}
	}
	if err := b.Set(schemaKey, []byte(schemaVersion), nil); err != nil {
		return err
	}
	return s.commitSynced(b)
}

// pebbleLogger adapts slog to Pebble's logger for one instance. Fatalf
// marks the instance dead and parks the goroutine (see guardFS), so that
// the process goes on and the store reopens the directory; it returns
// only once the instance is retired (Pebble's callers then see the
// error they reported and wind down, every write failing), so that the
// instance can be closed. A retired instance's errors are logged at
// debug level: they are the failures of its closing.
type pebbleLogger struct {
	l  *slog.Logger
	in *instance
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	if p.in.retired() {
		p.l.Debug("pebble (retired instance): " + fmt.Sprintf(format, args...))
		return
	}
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(msg, "pebble:") {
		msg = "pebble: " + msg
	}
	if p.in.fail(errors.New(msg)) {
		p.l.Error(msg)
	}
	<-p.in.release
}

// Close closes the store. A store whose directory failed is left as a
// crash would leave it: every acknowledged write is in the WAL. Errors:
// Pebble's; ErrClosed on a second call.
func (s *Store) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.recMu.Lock()
		s.closed = true
		close(s.closing)
		s.recMu.Unlock()
	})
	if !first {
		return ErrClosed
	}
	s.wg.Wait()
	return s.closeInstance()
}

func (s *Store) get(k []byte) ([]byte, error) {
	db, done := s.read()
	defer done()
	return getFrom(db, k)
}

// scanRows is scanRows over the instance in use.
func (s *Store) scanRows(prefix []byte) ([]remotelog.SegmentMetadata, error) {
	db, done := s.read()
	defer done()
	return scanRows(db, prefix)
}

func getFrom(r reader, k []byte) ([]byte, error) {
	v, closer, err := r.Get(k)
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
// start offset; the whole key space is in the package doc):
//
//	's' topic 0x00 partition(4) startOffset(8) segmentID(16) -> SegmentMetadata JSON
//	'f' topic 0x00 partition(4) startOffset(8) segmentID(16) -> the same, finished rows only
//	'p' topic 0x00 partition(4)                             -> PartitionOffsets JSON
const (
	segmentTag   = 's'
	finishedTag  = 'f'
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

func finishedPrefix(tp remotelog.TopicPartition) []byte { return tpBytes([]byte{finishedTag}, tp) }

func finishedKey(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) []byte {
	k := binary.BigEndian.AppendUint64(finishedPrefix(tp), uint64(start))
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

// Generation returns a number that changes after every write to the
// store (of any partition) and after the store reopens its database, so
// a caller may keep what it read for as long as the number is unchanged.
// Writes to the broker-copy catalogue (PutBrokerCopy and the others of
// brokercopies.go) do not change it: nothing read through the other
// methods depends on them.
func (s *Store) Generation() uint64 { return s.gen.Load() }
