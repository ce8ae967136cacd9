package rsmapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/partlabels"
)

// Server is the RSM endpoint (see the package doc). Run serves it.
type Server struct {
	cfg     Config
	cat     Catalogue
	st      Storage
	rd      LogReader
	inspect Inspector
	log     *slog.Logger
	reg     prometheus.Registerer
	labels  *partlabels.Set
	m       *metrics
	tok     tokenHolder
	tls     *tls.Config
	ready   func() (bool, string)
	sidecar func(topic string) bool
	now     func() time.Time

	slots     chan struct{} // one per copy running
	flights   *flights
	manifests *manifestCache

	copies       context.Context // parent of every copy; ends at shutdown, after shutdownGrace
	cancelCopies context.CancelFunc
	shutting     atomic.Bool
	addr         atomic.Pointer[string] // the address Serve listens on

	janitorOff bool          // tests run its passes themselves
	bodyGrace  time.Duration // unreadBodyGrace; tests shorten it

	statusMu  sync.Mutex
	lastError string // the last failed request's error, for the status
	lastErrMs int64
}

// Option sets an optional collaborator.
type Option func(*Server)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithRegisterer registers the endpoint's metrics (default: a registry of
// its own).
func WithRegisterer(r prometheus.Registerer) Option { return func(s *Server) { s.reg = r } }

// WithPartitionLabels bounds the per-partition series with labels, shared
// with the copier's and fetch's (default: a set of partlabels.DefaultMax).
func WithPartitionLabels(l *partlabels.Set) Option { return func(s *Server) { s.labels = l } }

// WithTLS serves over TLS with c (tls.rsm; default plaintext).
func WithTLS(c *tls.Config) Option { return func(s *Server) { s.tls = c } }

// WithReadiness sets what GET /v1/health answers: tierd's readiness
// (default: ready).
func WithReadiness(fn func() (bool, string)) Option { return func(s *Server) { s.ready = fn } }

// WithSidecarTopics sets the test of whether tierd's own copier tiers a
// topic: a copy of such a topic is refused 409 TIERED_BY_SIDECAR
// (default: none is).
func WithSidecarTopics(fn func(topic string) bool) Option { return func(s *Server) { s.sidecar = fn } }

// WithLogReader reads copies' .log through tierd's chunk cache (default:
// one ranged GET per read, no cache).
func WithLogReader(r LogReader) Option { return func(s *Server) { s.rd = r } }

// WithInspector replaces the segment check (default: Inspect).
func WithInspector(fn Inspector) Option { return func(s *Server) { s.inspect = fn } }

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// New returns the endpoint over the catalogue and the storage of the
// broker-owned copies. It reads the token file (an error if it is
// unusable: see ReadToken) and does no other I/O.
func New(cfg Config, cat Catalogue, st Storage, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled {
		return nil, errors.New("rsm: the endpoint is not enabled (rsm.enabled)")
	}
	if cfg.StagingDir == "" {
		return nil, errors.New("rsm: staging_dir is required")
	}
	s := &Server{cfg: cfg, cat: cat, st: st, log: slog.New(slog.DiscardHandler), now: time.Now,
		slots: make(chan struct{}, cfg.MaxConcurrentCopies), flights: newFlights(), manifests: newManifestCache(manifestCacheSize),
		bodyGrace: unreadBodyGrace}
	for _, o := range opts {
		o(s)
	}
	if s.rd == nil {
		s.rd = directReader{st: st}
	}
	if s.inspect == nil {
		s.inspect = Inspect
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	if s.labels == nil {
		s.labels = partlabels.New(partlabels.DefaultMax)
	}
	s.tok.path = cfg.TokenFile
	if err := s.tok.load(); err != nil {
		return nil, err
	}
	s.m = newMetrics(s.reg, s.labels, s.flights.copying)
	s.copies, s.cancelCopies = context.WithCancel(context.Background())
	return s, nil
}

// ReloadToken reads rsm.token_file again (SIGHUP). On an error the token
// in use stays, and the error (naming the file, not the token) is
// returned.
func (s *Server) ReloadToken() error {
	if err := s.tok.load(); err != nil {
		s.log.Error("rsm: token reload failed; keeping the token in use", "err", err)
		return err
	}
	s.log.Info("rsm: token reloaded", "token_file", s.cfg.TokenFile)
	return nil
}

// Addr returns the address Serve listens on ("" before it does).
func (s *Server) Addr() string {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// unreadBodyGrace is how long the server may go on reading the rest of a
// request body that no handler reads (to keep the connection for the
// next request) before it gives up and closes the connection: a client
// that has sent its body is not kept waiting, one that stalls mid-body is
// cut.
const unreadBodyGrace = 10 * time.Second

// shutdownGrace is how long copies in flight may go on once shutdown
// begins; then they are ended (their objects deleted, answered 503).
const shutdownGrace = 10 * time.Second

// Run listens on rsm.listen and serves until ctx ends; see Serve.
func (s *Server) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("rsm: listen: %w", err)
	}
	return s.Serve(ctx, lis)
}

// Serve serves on lis (over TLS when WithTLS was given) until ctx ends,
// with the clean-up of failed copy attempts running beside it (see the
// package doc, "When the broker's view and tierd's differ"). At the end
// it stops taking requests, lets those in flight finish (copies for up
// to shutdownGrace, then ends them), and returns nil.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	addr := lis.Addr().String()
	s.addr.Store(&addr)
	if s.tls != nil {
		lis = tls.NewListener(lis, s.tls)
	}
	if err := s.clearStaging(); err != nil {
		s.log.Warn("rsm: could not clear what earlier runs left in the staging dir", "dir", s.cfg.StagingDir, "err", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	jctx, stopJanitor := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !s.janitorOff {
			s.janitor(jctx)
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		s.shutting.Store(true)
		grace := time.AfterFunc(shutdownGrace, s.cancelCopies)
		defer grace.Stop()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace+s.cfg.RequestTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	}()
	s.log.Info("rsm: endpoint serving", "listen", addr, "tls", s.tls != nil, "log_dirs", s.cfg.LogDirs, "prefix", s.cfg.Prefix)
	err := srv.Serve(lis)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		err = nil
	} else {
		srv.Close()
	}
	s.cancelCopies()
	stopJanitor()
	wg.Wait()
	return err
}

// Handler returns the endpoint's routes behind the bearer token check.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	const c = "/v1/segments/{topic}/{partition}/{start}/{id}"
	mux.HandleFunc("PUT "+c, s.handleCopy)
	mux.HandleFunc("GET "+c+"/log", s.handleLog)
	mux.HandleFunc("GET "+c+"/index/{type}", s.handleIndex)
	mux.HandleFunc("DELETE "+c, s.handleDelete)
	mux.HandleFunc("GET /v1/health", s.handleHealth)
	mux.HandleFunc("GET /v1/status", s.handleStatus)
	mux.HandleFunc("GET /v1/segments/{topic}/{partition}", s.handleRows)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		answerError(w, invalidf("no route %s %s in wire version 1", r.Method, r.URL.Path))
	})
	return s.authenticated(mux)
}

// authenticated answers 401 to a request without the token in use, and
// counts it; nothing about the token goes into the answer or the log. A
// refused request's connection is closed after the answer. A request
// with a body may take bodyGrace to send what no handler reads (a copy
// sets its own bound while it reads its body).
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			s.boundUnreadBody(w)
		}
		if err := s.tok.check(r); err != nil {
			w.Header().Set("Connection", "close")
			s.m.authFailures.WithLabelValues(authFailure(err)).Inc()
			s.m.nAuth.Add(1)
			s.log.Debug("rsm: request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", authFailure(err))
			answerError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// boundUnreadBody gives the rest of a request's body bodyGrace to arrive.
// net/http reads what a handler left unread before it answers (to keep
// the connection), with no deadline of its own: a client that stalls
// mid-body would hold the connection, its goroutine and its descriptor
// for ever. Past the grace the read fails and the connection is closed
// after the answer.
func (s *Server) boundUnreadBody(w http.ResponseWriter) {
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyGrace))
}

// healthAnswer is GET /v1/health's body when ready.
type healthAnswer struct {
	Status string `json:"status"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.shutting.Load() {
		answerError(w, fmt.Errorf("%w: shutting down", ErrUnavailable))
		return
	}
	if s.ready != nil {
		if ok, why := s.ready(); !ok {
			answerError(w, fmt.Errorf("%w: not ready: %s", ErrUnavailable, why))
			return
		}
	}
	writeJSON(w, http.StatusOK, healthAnswer{Status: "ok"})
}

// noteError keeps a failed request's error for the status.
func (s *Server) noteError(err error) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	s.lastError, s.lastErrMs = err.Error(), s.now().UnixMilli()
}
