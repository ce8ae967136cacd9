package remoteread

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/quota"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/remoteread/cache"
)

// Metadata is what the engine needs from rlmm.Store.
type Metadata interface {
	// Partitions lists the partitions that have offsets recorded.
	Partitions() ([]remotelog.TopicPartition, error)
	Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error)
	// PartitionVersion, ChangesSince and FinishedSnapshot keep the
	// per-partition snapshots of reads (metasnap.go) up to date.
	PartitionVersion(tp remotelog.TopicPartition) remotelog.Version
	ChangesSince(tp remotelog.TopicPartition, since remotelog.Version) ([]remotelog.Change, remotelog.Version, bool)
	FinishedSnapshot(tp remotelog.TopicPartition) (remotelog.Version, remotelog.PartitionOffsets, bool, []remotelog.SegmentMetadata, error)
}

// Remote is what the engine needs from rsm.Manager.
type Remote interface {
	FetchLogSegment(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error)
	FetchIndex(ctx context.Context, meta remotelog.SegmentMetadata, t remotelog.IndexType) ([]byte, error)
}

// Option sets an optional collaborator.
type Option func(*Engine)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Engine) { s.log = l } }

// WithRegisterer registers the engine's metrics (default: a registry of
// its own).
func WithRegisterer(r prometheus.Registerer) Option { return func(s *Engine) { s.reg = r } }

// WithMissingCopyHook has fn told, after the answer, of every finished
// copy a read (ReadRemote, the Remote* methods that read objects, and so
// the gRPC edge's Fetch and ListOffsets) found an object of missing, still
// missing after the retries that rule out a retention delete (answered
// ErrDataLoss; DATA_LOSS over gRPC): the copier checks such a copy on its
// next pass (copier.SuspectCopy). fn must not block.
func WithMissingCopyHook(fn func(remotelog.SegmentMetadata)) Option {
	return func(s *Engine) { s.onMissing = fn }
}

// Engine reads the remote tier: over remote metadata and remote storage,
// through a chunk cache, with read-ahead for sequential readers. Its
// methods are safe for concurrent use.
type Engine struct {
	cfg    Config
	md     Metadata
	rs     Remote
	cache  *cache.Cache
	idx    *indexCache
	meta   *metaCache // per-partition metadata snapshots (metasnap.go)
	seq    *seqTracker
	ranges *rangeTracker // WriteLogRange's sequential readers (lograngetrack.go)
	log    *slog.Logger
	reg    prometheus.Registerer
	m      engineMetrics

	onMissing func(remotelog.SegmentMetadata) // told of copies with a missing object
	losses    lossLog                         // data-loss answers logged
	labels    *partlabels.Set                 // per-partition metric labels, bounded
	km        kafkaMetrics                    // metrics named after Kafka's (kafkametrics.go)
	pm        prefetchMetrics                 // bytes served (prefetch.go)
	storeDown func() error                    // nil: reads do not ask (see WithStoreHealth)

	bg       context.Context // background loads; ends at Close
	bgCancel context.CancelFunc

	dyn        atomic.Pointer[Config] // cfg with the dynamic settings of the last Reconfigure
	fetchQuota *quota.Limiter
}

type engineMetrics struct {
	gets, bytes, indexGets, indexBytes prometheus.Counter
	short                              *prometheus.CounterVec // answers cut short, by reason
}

// New returns an engine. It opens the cache (scanning its disk tier, if
// any) and does no other I/O. Close releases the cache. Errors: cfg's
// (Validate), the cache's.
func New(cfg Config, md Metadata, rs Remote, opts ...Option) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Engine{cfg: cfg, md: md, rs: rs, idx: newIndexCache(cfg.IndexCacheBytes), seq: newSeqTracker(), ranges: newRangeTracker(), log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.initDynamic()
	f := promauto.With(s.reg)
	s.m = engineMetrics{
		gets:       f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_log_gets_total", Help: "Ranged GETs of remote .log objects (reads and prefetch)."}),
		bytes:      f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_log_bytes_total", Help: "Bytes asked of remote .log objects by ranged GETs."}),
		indexGets:  f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_index_gets_total", Help: "GETs of remote index objects."}),
		indexBytes: f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_index_bytes_total", Help: "Bytes of remote index objects read."}),
		short: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_fetch_short_answers_total",
			Help: "Reads answered with the whole batches that arrived, fewer than max_bytes allowed, by reason: max_wait (remote.fetch.max.wait.ms ended), load_failed (a load failed mid-body)."}, []string{"reason"}),
	}
	for _, r := range []string{"max_wait", "load_failed"} {
		s.m.short.WithLabelValues(r)
	}
	s.km = newKafkaMetrics(f)
	s.meta = newMetaCache(md, f)
	s.pm = newPrefetchMetrics(f)
	if s.labels == nil {
		s.labels = partlabels.New(partlabels.DefaultMax)
	}
	s.labels.OnAdmit(s.km.zero) // series from the start, for alerts and absent()
	var err error
	if s.cache, err = cache.New(cfg.Cache, s.reg); err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	s.bg, s.bgCancel = context.WithCancel(context.Background())
	return s, nil
}

// Close stops background loads and releases the cache.
func (s *Engine) Close() {
	s.bgCancel()
	s.cache.Close()
}

// DropCaches empties the chunk cache (after the loads in flight end) and
// forgets where reads ended (so none looks sequential); with indexes,
// the index cache too: the state of an engine that has read nothing. For
// benchmarks of cold reads.
func (s *Engine) DropCaches(indexes bool) {
	s.cache.Drop()
	s.seq.clear()
	s.ranges.clear()
	if indexes {
		s.idx.clear()
	}
}

// Settle waits until the cache has no load in flight (see cache.Settle).
func (s *Engine) Settle() { s.cache.Settle() }

// object is a copy's .log as the cache reads it.
func (s *Engine) object(meta remotelog.SegmentMetadata) cache.Object {
	return cache.Object{Key: meta.ID.String() + ".log", Size: meta.SizeInBytes,
		Open: func(ctx context.Context, start, end int64) (io.ReadCloser, error) {
			s.m.gets.Inc()
			s.m.bytes.Add(float64(end - start))
			rc, err := s.rs.FetchLogSegment(ctx, meta, start, end)
			if err != nil {
				return nil, err
			}
			return s.throttled(ctx, rc), nil
		}}
}

// Config returns the settings reads run with now: New's, with the
// dynamic ones of the last Reconfigure.
func (s *Engine) Config() Config { return *s.conf() }

// Cache is the engine's chunk cache, for inspection (its pins, budgets
// and prefetch holdings); reads go through the engine.
func (s *Engine) Cache() *cache.Cache { return s.cache }

// IndexCacheBytes is the size of the parsed indexes the index cache
// holds now, bytes (within remote.log.index.file.cache.total.size.bytes).
func (s *Engine) IndexCacheBytes() int64 {
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	return s.idx.size
}
