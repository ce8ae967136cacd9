package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/listener/groups"
	"github.com/tierd/tierd/listener/sasl"
)

// shutdownGrace bounds how long a stopping listener lets requests in
// progress finish (their Log calls are cancelled after it) before closing
// their connections.
const shutdownGrace = 5 * time.Second

// Option sets an optional collaborator or identity.
type Option func(*Server)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.logger = l } }

// WithRegisterer registers the listener's metrics (default: a private
// registry).
func WithRegisterer(r prometheus.Registerer) Option { return func(s *Server) { s.reg = r } }

// WithNodeID sets the broker id Metadata gives for the one broker tierd
// presents (tierd's broker_id). Default 0.
func WithNodeID(id int32) Option { return func(s *Server) { s.nodeID = id } }

// WithClusterID sets the cluster id Metadata gives (v2+). Default "",
// sent as null.
func WithClusterID(id string) Option { return func(s *Server) { s.clusterID = id } }

// Server is the read-only Kafka protocol listener: one broker that leads
// every partition its Log serves. It is safe for one Run or Serve at a
// time.
type Server struct {
	cfg       Config
	log       Log
	logger    *slog.Logger
	reg       prometheus.Registerer
	m         *metrics
	nodeID    int32
	clusterID string
	tls       *tls.Config // nil: plaintext
	authz     Authorizer  // nil: every client may read every topic served
	sasl      sasl.Authenticator
	groups    *groups.Coordinator // nil: consumer groups are not served (groupapi.go)
	fwd       GroupForwarder      // set: groups are the cluster's, relayed (groupforward.go)
	failures  failureCounts       // failed logins by client address (saslconn.go)
	steps     inflight            // SASL steps running by client address (saslconn.go)

	// failureDelayed, when set (tests only: withFailureDelayed), is told
	// of every failed login held against its address before the delay:
	// the client's remote address, the address's failures in the window
	// (this one included) and the delay the answer waits.
	failureDelayed func(remote string, failures int, delay time.Duration)

	// Set by Serve.
	advHost string
	advPort int32

	topics   topicCache
	once     onceLog
	fetchMem *semaphore.Weighted // fetch.response.memory.bytes (fetchmem.go)

	perIP   map[string]int          // max.connections.per.ip.overrides
	mapping kafkaacl.PrincipalRules // ssl.principal.mapping.rules

	mu    sync.Mutex
	conns map[*conn]struct{}
	byIP  map[string]int // open connections by client address
}

// New returns a listener serving log. It validates cfg (an empty Listen
// is allowed: Serve still works, Run refuses) and does no I/O.
func New(cfg Config, log Log, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		return nil, errors.New("listener: no Log to serve")
	}
	s := &Server{cfg: cfg, log: log, logger: slog.New(slog.DiscardHandler), conns: map[*conn]struct{}{}, byIP: map[string]int{}}
	s.perIP, _ = cfg.perIPOverrides()                                         // checked by Validate
	s.mapping, _ = kafkaacl.ParsePrincipalRules(cfg.SSLPrincipalMappingRules) // checked by Validate
	for _, o := range opts {
		o(s)
	}
	if cfg.SASL() && s.sasl == nil {
		return nil, errors.New("listener: sasl.enabled.mechanisms is set but no credentials were given (WithSASL)")
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.m = newMetrics(s.reg)
	s.topics.log = log
	s.fetchMem = semaphore.NewWeighted(cfg.FetchResponseMemoryBytes)
	return s, nil
}

// Run listens on cfg.Listen and serves until ctx ends, then stops
// gracefully (see Serve). It refuses an empty Listen.
func (s *Server) Run(ctx context.Context) error {
	if !s.cfg.Enabled() {
		return errors.New("listener: listen is empty (the listener is off)")
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listener: %w", err)
	}
	return s.Serve(ctx, lis)
}

// Serve accepts Kafka clients on lis until ctx ends, then closes lis,
// lets requests in progress finish (a long-polling Fetch answers at once)
// for up to 5 s, closes every connection and returns nil. It returns an
// error only when accepting fails for another reason. With WithTLS, lis
// is plaintext and Serve does the TLS.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	host, port, replaced, err := advertisedAddr(s.cfg, lis.Addr())
	if err != nil {
		lis.Close()
		return err
	}
	s.advHost, s.advPort = host, port
	if s.tls != nil {
		lis = tls.NewListener(lis, s.tls)
	}
	if replaced {
		s.logger.Warn("Kafka listener on all interfaces advertises 127.0.0.1; set advertised (or advertised.listeners) for clients on other hosts",
			"listen", lis.Addr().String())
	}
	s.logger.Info("Kafka listener serving", "listen", lis.Addr().String(), "advertised", net.JoinHostPort(host, fmt.Sprint(port)),
		"node_id", s.nodeID, "tls", s.tls != nil)

	// reqCtx outlives ctx by shutdownGrace so requests in progress can
	// finish their Log calls.
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	stopping := make(chan struct{})
	var wg sync.WaitGroup
	acceptErr := make(chan error, 1)
	go func() {
		for {
			nc, err := lis.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			c := s.newConn(nc, stopping)
			if c == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.serve(reqCtx)
			}()
		}
	}()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-acceptErr:
		if ctx.Err() == nil {
			runErr = fmt.Errorf("listener: accept: %w", err)
		}
	}
	lis.Close()
	close(stopping)
	s.mu.Lock()
	for c := range s.conns {
		c.stop()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		cancelReqs()
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
	s.logger.Info("Kafka listener stopped")
	return runErr
}

// newConn registers an accepted connection, or closes it at once when
// max.connections are open (and returns nil).
func (s *Server) newConn(nc net.Conn, stopping chan struct{}) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip := ipOf(nc.RemoteAddr())
	if limit, ok := s.perIP[ip]; (ok && s.byIP[ip] >= limit) || (!ok && s.byIP[ip] >= s.cfg.MaxConnectionsPerIP) {
		s.m.closed.WithLabelValues(reasonMaxConnsIP).Inc() // counted before the close the client sees
		nc.Close()
		if s.once.first(reasonMaxConnsIP, ip, "") {
			s.logger.Warn("Kafka connection refused: max.connections.per.ip open from its address", "remote", nc.RemoteAddr().String(),
				"open", s.byIP[ip])
		}
		return nil
	}
	if len(s.conns) >= s.cfg.MaxConnections {
		s.m.closed.WithLabelValues(reasonMaxConns).Inc() // counted before the close the client sees
		nc.Close()
		if s.once.first(reasonMaxConns, hostOf(nc.RemoteAddr()), "") {
			s.logger.Warn("Kafka connection refused: max.connections open", "remote", nc.RemoteAddr().String(),
				"max_connections", s.cfg.MaxConnections)
		}
		return nil
	}
	c := &conn{s: s, nc: nc, stopping: stopping, remote: nc.RemoteAddr().String(), ip: ip}
	s.conns[c] = struct{}{}
	s.byIP[ip]++
	s.m.conns.Inc()
	return c
}

func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.byIP[c.ip]--; s.byIP[c.ip] <= 0 {
		delete(s.byIP, c.ip)
	}
	s.mu.Unlock()
	s.m.conns.Dec()
}

// ipOf is the client address connections are counted by: the IP
// address, normalized (IPv4-mapped IPv6 as IPv4), or the address's text.
func ipOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap().String()
		}
	}
	return hostOf(a)
}

func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}

// onceLog remembers which (reason, client) pairs were logged, so each
// problem is logged once per client. It holds at most onceLogMax keys and
// starts over when full.
type onceLog struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

const onceLogMax = 4096

// first reports whether this is the first time reason is seen for the
// client (remote host and client id).
func (o *onceLog) first(reason, host, clientID string) bool {
	k := reason + "\x00" + host + "\x00" + clientID
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[k]; ok {
		return false
	}
	if o.seen == nil || len(o.seen) >= onceLogMax {
		o.seen = map[string]struct{}{}
	}
	o.seen[k] = struct{}{}
	return true
}

// topicCache keeps the Log's topics for Fetch v13+, which names topics by
// id: refreshed by every Metadata request and, on an id it does not know,
// when older than topicCacheMinAge.
type topicCache struct {
	log  Log
	mu   sync.Mutex
	byID map[[16]byte]string
	at   time.Time
}

const topicCacheMinAge = 200 * time.Millisecond

func (t *topicCache) set(topics []Topic) {
	m := make(map[[16]byte]string, len(topics))
	for _, tp := range topics {
		if tp.Name != clusterMetadataTopic { // never served: its id is unknown
			m[tp.ID] = tp.Name
		}
	}
	t.mu.Lock()
	t.byID, t.at = m, time.Now()
	t.mu.Unlock()
}

// name returns the topic with id, or "" when the Log holds none.
func (t *topicCache) name(ctx context.Context, id [16]byte) (string, error) {
	t.mu.Lock()
	n, ok := t.byID[id]
	fresh := time.Since(t.at) < topicCacheMinAge
	t.mu.Unlock()
	if ok || fresh {
		return n, nil
	}
	topics, err := t.log.Topics(ctx)
	if err != nil {
		return "", err
	}
	t.set(topics)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id], nil
}
