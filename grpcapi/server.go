package grpcapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
)

// Option sets an optional collaborator.
type Option func(*Server)

// WithLogger sets the logger of the server and its engine (default:
// discard).
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) { s.log = l; s.eopts = append(s.eopts, remoteread.WithLogger(l)) }
}

// WithRegisterer registers the metrics of the server and its engine.
func WithRegisterer(r prometheus.Registerer) Option {
	return func(s *Server) { s.reg = r; s.eopts = append(s.eopts, remoteread.WithRegisterer(r)) }
}

// WithEngine passes options to the read engine NewServer builds
// (remoteread.WithStoreHealth, WithPartitionLabels, WithMissingCopyHook).
// It acts inside NewServer only (not in Configure).
func WithEngine(opts ...remoteread.Option) Option {
	return func(s *Server) { s.eopts = append(s.eopts, opts...) }
}

// Server is the gRPC edge of the remote read engine: it implements
// tierdpb.RemoteFetchServer over a *remoteread.Engine, maps the engine's
// errors to gRPC codes (toStatus), and serves the Admin and health
// services beside it. Callers in process read through Engine.
type Server struct {
	tierdpb.UnimplementedRemoteFetchServer
	cfg    Config
	e      *remoteread.Engine
	eopts  []remoteread.Option // for NewServer's engine
	groups GroupSource         // WithGroups, given to the Admin service
	log    *slog.Logger
	reg    prometheus.Registerer
	reqs   *prometheus.CounterVec // RPCs by method and code

	admin  *adminServer          // nil: no Admin service
	ready  func() (bool, string) // the health service's readiness; nil: always
	tls    *tls.Config           // nil: plaintext
	auth   Auth                  // who may call (auth.go)
	socket string                // the admin socket's path; "": none
}

// NewServer returns a server over a read engine of cfg's settings on md
// and rs (remoteread.New: it opens the cache, scanning its disk tier, if
// any, and does no other I/O). Close releases the engine. Errors: cfg's
// (Validate), the engine's.
func NewServer(cfg Config, md remoteread.Metadata, rs remoteread.Remote, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	if s.admin != nil {
		s.admin.groups = s.groups
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.eopts = append(s.eopts, remoteread.WithRegisterer(s.reg))
	}
	var err error
	if s.e, err = remoteread.New(cfg.Config, md, rs, s.eopts...); err != nil {
		return nil, err
	}
	s.eopts = nil
	s.reqs = promauto.With(s.reg).NewCounterVec(prometheus.CounterOpts{Name: "tierd_fetch_requests_total", Help: "RPCs by method and status code."}, []string{"method", "code"})
	return s, nil
}

// Engine is the read engine the server serves: the Go read API
// (ReadRemote and the Remote* methods, WriteLogRange) for callers in
// process.
func (s *Server) Engine() *remoteread.Engine { return s.e }

// Close stops the engine's background loads and releases its cache.
// Serve calls it when it returns.
func (s *Server) Close() { s.e.Close() }

// Reconfigure applies next's dynamic settings to the engine (see
// remoteread.Engine.Reconfigure); the listen address is static.
func (s *Server) Reconfigure(next Config) error { return s.e.Reconfigure(next.Config) }

// Run listens on cfg.Listen and, with WithAdminSocket, on the admin
// socket, and serves until ctx is done, then stops gracefully.
func (s *Server) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.Listen)
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
	s.reqs.WithLabelValues(method, st.Code().String()).Inc()
	if st == nil {
		return nil
	}
	return st.Err()
}

// ListOffsets implements tierdpb.RemoteFetchServer over the engine's
// TieredOffsets, RemoteOffsetForTimestamp and RemoteMaxTimestamp.
func (s *Server) ListOffsets(ctx context.Context, req *tierdpb.ListOffsetsRequest) (*tierdpb.ListOffsetsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.e.RequestTimeout())
	defer cancel()
	resp, err := s.listOffsets(ctx, req)
	return resp, s.observe("ListOffsets", err)
}

func (s *Server) listOffsets(ctx context.Context, req *tierdpb.ListOffsetsRequest) (*tierdpb.ListOffsetsResponse, error) {
	tp := remotelog.TopicPartition{Topic: req.Topic, Partition: req.Partition}
	var offset, ts int64
	var found bool
	var err error
	switch req.Spec {
	case tierdpb.OffsetSpec_EARLIEST, tierdpb.OffsetSpec_LATEST_TIERED:
		offs, err := s.e.TieredOffsets(tp)
		if err != nil {
			return nil, err
		}
		if req.Spec == tierdpb.OffsetSpec_EARLIEST {
			return &tierdpb.ListOffsetsResponse{Offset: offs.LogStartOffset, Timestamp: -1}, nil
		}
		return &tierdpb.ListOffsetsResponse{Offset: offs.HighestTieredOffset, Timestamp: -1}, nil
	case tierdpb.OffsetSpec_TIMESTAMP:
		offset, ts, found, err = s.e.RemoteOffsetForTimestamp(ctx, tp, req.Timestamp)
	case tierdpb.OffsetSpec_MAX_TIMESTAMP:
		offset, ts, found, err = s.e.RemoteMaxTimestamp(ctx, tp)
	default:
		return nil, invalidf("unknown offset spec %v", req.Spec)
	}
	if err != nil {
		return nil, err
	}
	if !found {
		return &tierdpb.ListOffsetsResponse{Offset: -1, Timestamp: -1}, nil // Kafka's "no such offset"
	}
	return &tierdpb.ListOffsetsResponse{Offset: offset, Timestamp: ts}, nil
}

// ListSegments implements tierdpb.RemoteFetchServer.
func (s *Server) ListSegments(_ context.Context, req *tierdpb.ListSegmentsRequest) (*tierdpb.ListSegmentsResponse, error) {
	resp, err := s.listSegments(req)
	return resp, s.observe("ListSegments", err)
}

func (s *Server) listSegments(req *tierdpb.ListSegmentsRequest) (*tierdpb.ListSegmentsResponse, error) {
	tp := remotelog.TopicPartition{Topic: req.Topic, Partition: req.Partition}
	offs, rows, err := s.e.RemoteSegments(tp)
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
		Compacted: r.Compacted, Form: r.Form, StoredSizeInBytes: r.StoredSizeInBytes, Encrypted: r.Encrypted}
	for _, id := range r.CompactionOf {
		m.CompactionOf = append(m.CompactionOf, id.String())
	}
	for _, e := range r.SegmentLeaderEpochs {
		m.LeaderEpochs = append(m.LeaderEpochs, &tierdpb.LeaderEpoch{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return m
}
