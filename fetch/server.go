package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc"

	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/quota"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread/cache"
)

// Metadata is what the server needs from rlmm.Store.
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

// Remote is what the server needs from rsm.Manager.
type Remote interface {
	FetchLogSegment(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error)
	FetchIndex(ctx context.Context, meta remotelog.SegmentMetadata, t remotelog.IndexType) ([]byte, error)
}

// Option sets an optional collaborator.
type Option func(*Server)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithRegisterer registers the server's metrics.
func WithRegisterer(r prometheus.Registerer) Option { return func(s *Server) { s.reg = r } }

// Server implements tierdpb.RemoteFetchServer over remote metadata and
// remote storage, reading through a chunk cache; its Remote* methods and
// ReadRemote are the same reads for callers in process.
type Server struct {
	tierdpb.UnimplementedRemoteFetchServer
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
	m      serverMetrics

	admin     *adminServer                    // nil: no Admin service
	onMissing func(remotelog.SegmentMetadata) // told of copies with a missing object
	losses    lossLog                         // data-loss answers logged
	labels    *partlabels.Set                 // per-partition metric labels, bounded
	km        kafkaMetrics                    // metrics named after Kafka's (kafkametrics.go)
	pm        prefetchMetrics                 // bytes served (prefetch.go)
	storeDown func() error                    // nil: reads do not ask (see WithStoreHealth)
	ready     func() (bool, string)           // the health service's readiness; nil: always
	tls       *tls.Config                     // nil: plaintext
	auth      Auth                            // who may call (auth.go)
	socket    string                          // the admin socket's path; "": none

	bg       context.Context // background loads; ends at Close
	bgCancel context.CancelFunc

	dyn        atomic.Pointer[Config] // cfg with the dynamic settings of the last Reconfigure
	fetchQuota *quota.Limiter
}

type serverMetrics struct {
	gets, bytes, indexGets, indexBytes prometheus.Counter
	reqs                               *prometheus.CounterVec
	short                              *prometheus.CounterVec // answers cut short, by reason
}

// NewServer returns a server. It opens the cache (scanning its disk tier,
// if any) and does no other I/O. Close releases the cache.
func NewServer(cfg Config, md Metadata, rs Remote, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, md: md, rs: rs, idx: newIndexCache(cfg.IndexCacheBytes), seq: newSeqTracker(), ranges: newRangeTracker(), log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.initDynamic()
	f := promauto.With(s.reg)
	s.m = serverMetrics{
		gets:       f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_log_gets_total", Help: "Ranged GETs of remote .log objects (reads and prefetch)."}),
		bytes:      f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_log_bytes_total", Help: "Bytes asked of remote .log objects by ranged GETs."}),
		indexGets:  f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_index_gets_total", Help: "GETs of remote index objects."}),
		indexBytes: f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_index_bytes_total", Help: "Bytes of remote index objects read."}),
		reqs:       f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_fetch_requests_total", Help: "RPCs by method and status code."}, []string{"method", "code"}),
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

// Close stops background loads. Serve calls it when it returns.
func (s *Server) Close() {
	s.bgCancel()
	s.cache.Close()
}

// DropCaches empties the chunk cache (after the loads in flight end) and
// forgets where fetches ended (so none looks sequential); with indexes,
// the index cache too: the state of a server that has read nothing. For
// benchmarks of cold reads.
func (s *Server) DropCaches(indexes bool) {
	s.cache.Drop()
	s.seq.clear()
	s.ranges.clear()
	if indexes {
		s.idx.clear()
	}
}

// Settle waits until the cache has no load in flight (see cache.Settle).
func (s *Server) Settle() { s.cache.Settle() }

// object is a copy's .log as the cache reads it.
func (s *Server) object(meta remotelog.SegmentMetadata) cache.Object {
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

// Run listens on cfg.Listen and, with WithAdminSocket, on the admin
// socket, and serves until ctx is done, then stops gracefully.
func (s *Server) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.conf().Listen)
	if err != nil {
		return fmt.Errorf("fetch: listen: %w", err)
	}
	if s.socket == "" {
		return s.Serve(ctx, lis)
	}
	ulis, err := ListenLocal(s.socket)
	if err != nil {
		lis.Close()
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.serveGRPC(ctx, ulis, true) }()
	err = s.serveGRPC(ctx, lis, false)
	cancel()
	return errors.Join(err, <-errc)
}

// WithAdminSocket has Run serve on the admin socket at path too
// (ListenLocal; default: none).
func WithAdminSocket(path string) Option { return func(s *Server) { s.socket = path } }

// ServerOptions are the gRPC server options of Serve: the first batch of
// a response goes out whatever its size (Kafka's rule), so the send limit
// is not fetch.max.bytes; records go out without a marshal copy
// (recordsCodec); HTTP/2 flow-control windows of 4 MiB let a response of a
// few MiB go out without waiting for window updates.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxSendMsgSize(math.MaxInt32), grpc.ForceServerCodecV2(newRecordsCodec()),
		grpc.InitialWindowSize(windowBytes), grpc.InitialConnWindowSize(windowBytes),
		grpc.WriteBufferSize(ioBufferBytes), grpc.ReadBufferSize(ioBufferBytes)}
}

// windowBytes is the HTTP/2 stream and connection window of both ends.
const windowBytes = 4 << 20

// ioBufferBytes is the gRPC transport's read and write buffer size.
const ioBufferBytes = 512 << 10

// Serve serves on lis until ctx is done: tierd's services, the health
// service and server reflection (see newGRPCServer), over TLS when
// WithTLS was given. It closes the server when it returns.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	defer s.Close()
	return s.serveGRPC(ctx, lis, false)
}

// ServeLocal serves on lis, the admin socket (ListenLocal), until ctx is
// done: every service, callers named by the kernel (auth.go). It does not
// close the server.
func (s *Server) ServeLocal(ctx context.Context, lis net.Listener) error {
	return s.serveGRPC(ctx, lis, true)
}

func (s *Server) serveGRPC(ctx context.Context, lis net.Listener, local bool) error {
	gs, hs := s.newGRPCServer(local)
	done := make(chan struct{})
	go func() {
		hctx, stopHealth := context.WithCancel(ctx)
		defer stopHealth()
		go hs.poll(hctx)
		select {
		case <-ctx.Done():
			hs.Shutdown() // NOT_SERVING while the calls in flight finish
			stopped := make(chan struct{})
			go func() { gs.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second): // in-flight calls had their chance
				gs.Stop()
			}
		case <-done:
		}
	}()
	err := gs.Serve(lis)
	close(done)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

func (s *Server) observe(method string, err error) error {
	st := toStatus(err)
	s.m.reqs.WithLabelValues(method, st.Code().String()).Inc()
	if st == nil {
		return nil
	}
	return st.Err()
}

// ListOffsets implements tierdpb.RemoteFetchServer over the partition's
// offsets, RemoteOffsetForTimestamp and RemoteMaxTimestamp.
func (s *Server) ListOffsets(ctx context.Context, req *tierdpb.ListOffsetsRequest) (*tierdpb.ListOffsetsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.conf().RequestTimeout)
	defer cancel()
	resp, err := s.listOffsets(ctx, req)
	return resp, s.observe("ListOffsets", err)
}

func (s *Server) listOffsets(ctx context.Context, req *tierdpb.ListOffsetsRequest) (*tierdpb.ListOffsetsResponse, error) {
	tp := remotelog.TopicPartition{Topic: req.Topic, Partition: req.Partition}
	var r tsOffset
	var err error
	switch req.Spec {
	case tierdpb.OffsetSpec_EARLIEST, tierdpb.OffsetSpec_LATEST_TIERED:
		offs, _, err := s.partitionState(tp)
		if err != nil {
			return nil, err
		}
		if req.Spec == tierdpb.OffsetSpec_EARLIEST {
			return &tierdpb.ListOffsetsResponse{Offset: offs.LogStartOffset, Timestamp: -1}, nil
		}
		return &tierdpb.ListOffsetsResponse{Offset: offs.HighestTieredOffset, Timestamp: -1}, nil
	case tierdpb.OffsetSpec_TIMESTAMP:
		r, err = s.timestampLookup(ctx, tp, req.Timestamp)
	case tierdpb.OffsetSpec_MAX_TIMESTAMP:
		r, err = s.maxTimestamp(ctx, tp)
	default:
		return nil, invalidf("unknown offset spec %v", req.Spec)
	}
	if err != nil {
		return nil, err
	}
	if !r.found {
		return &tierdpb.ListOffsetsResponse{Offset: -1, Timestamp: -1}, nil // Kafka's "no such offset"
	}
	return &tierdpb.ListOffsetsResponse{Offset: r.offset, Timestamp: r.timestamp}, nil
}

// ListSegments implements tierdpb.RemoteFetchServer.
func (s *Server) ListSegments(_ context.Context, req *tierdpb.ListSegmentsRequest) (*tierdpb.ListSegmentsResponse, error) {
	resp, err := s.listSegments(req)
	return resp, s.observe("ListSegments", err)
}

func (s *Server) listSegments(req *tierdpb.ListSegmentsRequest) (*tierdpb.ListSegmentsResponse, error) {
	tp := remotelog.TopicPartition{Topic: req.Topic, Partition: req.Partition}
	if req.Topic == "" || req.Partition < 0 {
		return nil, invalidf("topic must be set and partition must be >= 0 (got %q, %d)", req.Topic, req.Partition)
	}
	offs, ok, err := s.md.Offsets(tp)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotTiered, tp)
	}
	rows, err := s.md.Segments(tp)
	if err != nil {
		return nil, err
	}
	resp := &tierdpb.ListSegmentsResponse{LogStartOffset: offs.LogStartOffset, HighestTieredOffset: offs.HighestTieredOffset,
		LocalLogStartOffset: offs.LocalLogStartOffset}
	for _, r := range rows {
		resp.Segments = append(resp.Segments, SegmentToProto(r))
	}
	return resp, nil
}

// SegmentToProto converts a metadata row for the API.
func SegmentToProto(r remotelog.SegmentMetadata) *tierdpb.SegmentMetadata {
	m := &tierdpb.SegmentMetadata{SegmentId: r.ID.String(), StartOffset: r.StartOffset, EndOffset: r.EndOffset,
		MaxTimestampMs: r.MaxTimestampMs, EventTimestampMs: r.EventTimestampMs, SizeInBytes: r.SizeInBytes,
		State: r.State.String(), TxnIndexPresent: r.TxnIndexPresent, ProducerSnapshotPresent: r.ProducerSnapshotPresent, Damaged: r.Damaged,
		Compacted: r.Compacted}
	for _, id := range r.CompactionOf {
		m.CompactionOf = append(m.CompactionOf, id.String())
	}
	for _, e := range r.SegmentLeaderEpochs {
		m.LeaderEpochs = append(m.LeaderEpochs, &tierdpb.LeaderEpoch{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return m
}
