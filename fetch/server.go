package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm"
)

// Metadata is what the server needs from rlmm.Store.
type Metadata interface {
	Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error)
	// Snapshot returns offsets and finished rows as of one instant.
	Snapshot(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, []remotelog.SegmentMetadata, error)
}

// Remote is what the server needs from rsm.Manager.
type Remote interface {
	FetchLogSegment(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error)
	FetchIndex(ctx context.Context, meta remotelog.SegmentMetadata, t remotelog.IndexType) ([]byte, error)
}

// Config configures the server. Defaults are in DefaultConfig.
type Config struct {
	// Listen is the gRPC address. Default "127.0.0.1:7450".
	Listen string `yaml:"listen"`
	// ReadAheadBytes is the smallest ranged GET of a fetch, bytes.
	// Default 1048576.
	ReadAheadBytes int64 `yaml:"read_ahead_bytes"`
	// FetchMaxBytes caps a request's max_bytes (Kafka's fetch.max.bytes).
	// Default 52428800.
	FetchMaxBytes int32 `yaml:"fetch.max.bytes"`
	// IndexCacheEntries is how many segments' parsed indexes stay in
	// memory. Default 1024.
	IndexCacheEntries int `yaml:"index_cache_entries"`
	// RequestTimeout bounds one RPC, object store reads included, so a
	// hung store cannot hold a request (or a shutdown) forever. Default 30s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:7450", ReadAheadBytes: 1 << 20, FetchMaxBytes: 52428800, IndexCacheEntries: 1024, RequestTimeout: 30 * time.Second}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if err := CheckListen(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("fetch: %w", err))
	}
	if c.ReadAheadBytes < 4096 {
		errs = append(errs, fmt.Errorf("fetch: read_ahead_bytes %d must be at least 4096", c.ReadAheadBytes))
	}
	if c.FetchMaxBytes < 1 {
		errs = append(errs, fmt.Errorf("fetch: fetch.max.bytes %d must be positive", c.FetchMaxBytes))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("fetch: request_timeout %s must be positive", c.RequestTimeout))
	}
	if c.IndexCacheEntries < 1 {
		errs = append(errs, fmt.Errorf("fetch: index_cache_entries %d must be positive", c.IndexCacheEntries))
	}
	return errors.Join(errs...)
}

// CheckListen validates a listen address: host:port with a port in 0-65535.
func CheckListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen %q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("listen %q: port must be a number from 0 to 65535", addr)
	}
	return nil
}

// Option sets an optional collaborator.
type Option func(*Server)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithRegisterer registers the server's metrics.
func WithRegisterer(r prometheus.Registerer) Option { return func(s *Server) { s.reg = r } }

// Server implements tierdpb.RemoteFetchServer over remote metadata and
// remote storage.
type Server struct {
	tierdpb.UnimplementedRemoteFetchServer
	cfg  Config
	md   Metadata
	rs   Remote
	idx  *indexCache
	log  *slog.Logger
	reg  prometheus.Registerer
	gets prometheus.Counter
	reqs *prometheus.CounterVec
}

// NewServer returns a server. It does no I/O.
func NewServer(cfg Config, md Metadata, rs Remote, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, md: md, rs: rs, idx: newIndexCache(cfg.IndexCacheEntries), log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	f := promauto.With(s.reg)
	s.gets = f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_log_gets_total", Help: "Ranged GETs of remote .log objects."})
	s.reqs = f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_fetch_requests_total", Help: "RPCs by method and status code."}, []string{"method", "code"})
	return s, nil
}

// Run listens on cfg.Listen and serves until ctx is done, then stops
// gracefully.
func (s *Server) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("fetch: listen: %w", err)
	}
	return s.Serve(ctx, lis)
}

// Serve serves on lis until ctx is done.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	// The first batch of a response goes out whatever its size (Kafka's
	// rule), so the send limit is not fetch.max.bytes.
	gs := grpc.NewServer(grpc.MaxSendMsgSize(math.MaxInt32))
	tierdpb.RegisterRemoteFetchServer(gs, s)
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
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
	s.reqs.WithLabelValues(method, st.Code().String()).Inc()
	if st == nil {
		return nil
	}
	return st.Err()
}

// partitionState loads, from one snapshot, what every RPC needs, and
// rejects bad arguments and partitions tierd knows nothing of.
func (s *Server) partitionState(topic string, partition int32) (remotelog.PartitionOffsets, []remotelog.SegmentMetadata, error) {
	tp := remotelog.TopicPartition{Topic: topic, Partition: partition}
	if topic == "" || partition < 0 {
		return remotelog.PartitionOffsets{}, nil, invalidf("topic must be set and partition must be >= 0 (got %q, %d)", topic, partition)
	}
	offs, ok, fin, err := s.md.Snapshot(tp)
	if err != nil {
		return offs, nil, err
	}
	if !ok || (offs.HighestTieredOffset < 0 && len(fin) == 0) {
		return offs, nil, fmt.Errorf("%w: %s", errNotTiered, tp)
	}
	return offs, fin, nil
}

// retries is how often a read that raced a retention delete starts over
// with fresh metadata.
const retries = 3

// Fetch implements tierdpb.RemoteFetchServer.
func (s *Server) Fetch(ctx context.Context, req *tierdpb.FetchRequest) (*tierdpb.FetchResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	var resp *tierdpb.FetchResponse
	var err error
	for i := 0; i < retries; i++ {
		// A copy deleted by retention after the snapshot was taken reads as
		// a missing object: start over, and the new snapshot says whether
		// the offset is now below the log start offset.
		if resp, err = s.fetch(ctx, req); !errors.Is(err, rsm.ErrNotFound) {
			break
		}
	}
	return resp, s.observe("Fetch", err)
}

func (s *Server) fetch(ctx context.Context, req *tierdpb.FetchRequest) (*tierdpb.FetchResponse, error) {
	if req.Offset < 0 || req.MaxBytes < 0 {
		return nil, invalidf("offset and max_bytes must be >= 0 (got %d, %d)", req.Offset, req.MaxBytes)
	}
	offs, fin, err := s.partitionState(req.Topic, req.Partition)
	if err != nil {
		return nil, err
	}
	if req.Offset < offs.LogStartOffset || req.Offset > offs.HighestTieredOffset {
		return nil, &outOfRangeError{offset: req.Offset, logStart: offs.LogStartOffset, highest: offs.HighestTieredOffset}
	}
	maxBytes := int64(min(req.MaxBytes, s.cfg.FetchMaxBytes))
	want := req.Offset // the first offset still to find
	for _, meta := range fin {
		if meta.EndOffset < want {
			continue
		}
		if meta.StartOffset > want {
			// No copy covers these offsets (a segment deleted locally
			// before it was copied): say so rather than skip them.
			return nil, fmt.Errorf("%w: offsets %d to %d have no tiered copy", errHole, want, meta.StartOffset-1)
		}
		offsets, _, err := s.indexes(ctx, meta)
		if err != nil {
			return nil, err
		}
		var pos int64
		if e, ok := index.LookupOffset(offsets, req.Offset); ok {
			pos = int64(e.Position)
		}
		r := newSegmentReader(ctx, s.rs, meta, pos, max(s.cfg.ReadAheadBytes, maxBytes))
		data, next, err := r.readFrom(req.Offset, maxBytes)
		s.gets.Add(float64(r.gets))
		if err != nil {
			return nil, err
		}
		if len(data) > 0 {
			return &tierdpb.FetchResponse{Records: data, LogStartOffset: offs.LogStartOffset,
				HighestTieredOffset: offs.HighestTieredOffset, NextOffset: next}, nil
		}
		want = meta.EndOffset + 1 // compacted away to the segment's end
	}
	// Only offsets compacted away at the very end of the tiered log remain.
	return &tierdpb.FetchResponse{LogStartOffset: offs.LogStartOffset, HighestTieredOffset: offs.HighestTieredOffset,
		NextOffset: offs.HighestTieredOffset + 1}, nil
}

// ListOffsets implements tierdpb.RemoteFetchServer.
func (s *Server) ListOffsets(ctx context.Context, req *tierdpb.ListOffsetsRequest) (*tierdpb.ListOffsetsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	var resp *tierdpb.ListOffsetsResponse
	var err error
	for i := 0; i < retries; i++ {
		if resp, err = s.listOffsets(ctx, req); !errors.Is(err, rsm.ErrNotFound) {
			break
		}
	}
	return resp, s.observe("ListOffsets", err)
}

func (s *Server) listOffsets(ctx context.Context, req *tierdpb.ListOffsetsRequest) (*tierdpb.ListOffsetsResponse, error) {
	switch req.Spec {
	case tierdpb.OffsetSpec_EARLIEST, tierdpb.OffsetSpec_LATEST_TIERED, tierdpb.OffsetSpec_TIMESTAMP:
	default:
		return nil, invalidf("unknown offset spec %v", req.Spec)
	}
	offs, fin, err := s.partitionState(req.Topic, req.Partition)
	if err != nil {
		return nil, err
	}
	switch req.Spec {
	case tierdpb.OffsetSpec_EARLIEST:
		return &tierdpb.ListOffsetsResponse{Offset: offs.LogStartOffset, Timestamp: -1}, nil
	case tierdpb.OffsetSpec_LATEST_TIERED:
		return &tierdpb.ListOffsetsResponse{Offset: offs.HighestTieredOffset, Timestamp: -1}, nil
	}
	for _, meta := range fin {
		if meta.EndOffset < offs.LogStartOffset || meta.MaxTimestampMs < req.Timestamp {
			continue
		}
		off, ts, found, err := s.offsetForTimestamp(ctx, meta, req.Timestamp, offs.LogStartOffset)
		if err != nil {
			return nil, err
		}
		if found {
			return &tierdpb.ListOffsetsResponse{Offset: off, Timestamp: ts}, nil
		}
	}
	return &tierdpb.ListOffsetsResponse{Offset: -1, Timestamp: -1}, nil // Kafka's "no such offset"
}

func (s *Server) offsetForTimestamp(ctx context.Context, meta remotelog.SegmentMetadata, ts, logStart int64) (int64, int64, bool, error) {
	offsets, times, err := s.indexes(ctx, meta)
	if err != nil {
		return 0, 0, false, err
	}
	var pos int64
	if te, ok := index.LookupTime(times, ts); ok {
		if oe, ok := index.LookupOffset(offsets, max(te.Offset, logStart)); ok {
			pos = int64(oe.Position)
		}
	}
	r := newSegmentReader(ctx, s.rs, meta, pos, s.cfg.ReadAheadBytes)
	defer func() { s.gets.Add(float64(r.gets)) }()
	for {
		b, raw, ok, err := r.next()
		if err != nil || !ok {
			return 0, 0, false, err
		}
		if b.MaxTimestamp < ts || b.LastOffset < logStart {
			continue
		}
		recs, err := batch.Records(raw, codec.Kafka)
		if err != nil {
			return 0, 0, false, err
		}
		for _, rec := range recs {
			if rec.Timestamp >= ts && rec.Offset >= logStart {
				return rec.Offset, rec.Timestamp, true, nil
			}
		}
	}
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
		return nil, fmt.Errorf("%w: %s", errNotTiered, tp)
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
		State: r.State.String(), TxnIndexPresent: r.TxnIndexPresent, ProducerSnapshotPresent: r.ProducerSnapshotPresent}
	for _, e := range r.SegmentLeaderEpochs {
		m.LeaderEpochs = append(m.LeaderEpochs, &tierdpb.LeaderEpoch{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return m
}
