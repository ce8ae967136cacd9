package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Errors returned by this package.
var (
	// ErrNotConfigured is returned by New for a Config without bootstrap
	// servers.
	ErrNotConfigured = errors.New("cluster: no bootstrap_servers configured")
	// ErrClusterMismatch is returned when a broker answers with another
	// cluster id than Config.ClusterID (or, within one call, than an
	// earlier answer): the client is talking to the wrong cluster.
	ErrClusterMismatch = errors.New("cluster: cluster id mismatch")
	// ErrBadTopicID marks a topic id that is not 22 base64url characters
	// of 16 bytes, or is one of Kafka's reserved ids.
	ErrBadTopicID = errors.New("cluster: bad topic id")
)

// Option configures optional collaborators of a Client.
type Option func(*Client)

// WithLogger sets the logger. franz-go's own warnings and errors (failed
// connections, authentication failures) go to it too. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// Client asks one Kafka cluster for facts. It is safe for concurrent use.
type Client struct {
	cfg  Config
	log  *slog.Logger
	kcl  *kgo.Client
	auth authWatch
}

// New validates cfg and builds a client. It does no network I/O:
// connections are made by the first request. It reads
// cfg.SASL.PasswordFile once, so that a missing or empty file fails here
// rather than at the first request. It returns ErrNotConfigured when
// cfg has no bootstrap servers, and the validation error otherwise.
func New(cfg Config, opts ...Option) (*Client, error) {
	if !cfg.Enabled() {
		return nil, ErrNotConfigured
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(c)
	}
	kopts := []kgo.Opt{
		kgo.SeedBrokers(cfg.BootstrapServers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DialTimeout(cfg.RequestTimeout),
		kgo.RetryTimeout(cfg.RequestTimeout),
		kgo.WithLogger(kgoLogger{c.log}),
		kgo.WithHooks(&c.auth),
		kgo.MaxVersions(groupVersionCaps()),
	}
	if cfg.SASL.mechanism() != "" {
		if _, err := cfg.SASL.password(); err != nil {
			return nil, err
		}
		kopts = append(kopts, kgo.SASL(cfg.SASL.kgoMechanism()))
	}
	if cfg.TLS.Enabled {
		tc, err := cfg.TLS.config()
		if err != nil {
			return nil, err
		}
		kopts = append(kopts, kgo.DialTLSConfig(tc))
	}
	kcl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: build client: %w", err)
	}
	c.kcl = kcl
	return c, nil
}

// Close closes the connections. Requests in flight fail.
func (c *Client) Close() { c.kcl.Close() }

// request sends one request, bounded by RequestTimeout, to the broker
// kgo chooses, and returns the answer with the broker it came from. kgo
// may send a copy of req (DescribeConfigs is sharded), so the version
// sent is the response's GetVersion, not req's.
func (c *Client) request(ctx context.Context, req kmsg.Request) (kmsg.Response, kgo.BrokerMetadata, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	shards := c.kcl.RequestSharded(ctx, req)
	if len(shards) != 1 {
		return nil, kgo.BrokerMetadata{NodeID: -1}, fmt.Errorf("cluster: %s: %d answers, want 1", kmsg.NameForKey(req.Key()), len(shards))
	}
	s := shards[0]
	if s.Err != nil {
		// No version: a request that failed before the version
		// negotiation was never sent at any.
		err := fmt.Errorf("cluster: %s to %s: %w", kmsg.NameForKey(req.Key()), source(s.Meta, nil), s.Err)
		if f := c.auth.since(start); f != "" {
			err = fmt.Errorf("%w (%s: check sasl.mechanism %s, sasl.username %q and the password)", err, f, c.cfg.SASL.mechanism(), c.cfg.SASL.Username)
		}
		return nil, s.Meta, err
	}
	return s.Resp, s.Meta, nil
}

// authWatch notes when a broker fails a connection's SASL authentication
// by closing it, as some brokers (kfake) do instead of answering
// SASL_AUTHENTICATION_FAILED; the request that fails then only sees EOF or
// its deadline, and request adds what authWatch saw.
type authWatch struct {
	mu   sync.Mutex
	at   time.Time
	what string
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (w *authWatch) OnBrokerRead(m kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != int16(kmsg.SASLAuthenticate) || err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = time.Now()
	w.what = fmt.Sprintf("%s closed the connection during SASL authentication (%v)", source(m, nil), err)
}

// since returns the last failure seen at or after t, or "".
func (w *authWatch) since(t time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.what == "" || w.at.Before(t) {
		return ""
	}
	return w.what
}

// source names the broker that answered, as "broker 1 (host:port)". A
// bootstrap server not yet matched to a node id is looked up by address
// in brokers (the answer's broker list); when it is not there it is named
// "bootstrap host:port".
func source(m kgo.BrokerMetadata, brokers []kmsg.MetadataResponseBroker) string {
	if m.Host == "" {
		return "no broker"
	}
	addr := net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port)))
	id := m.NodeID
	for _, b := range brokers {
		if id < 0 && b.Host == m.Host && b.Port == m.Port {
			id = b.NodeID
		}
	}
	if id < 0 {
		return "bootstrap " + addr
	}
	return fmt.Sprintf("broker %d (%s)", id, addr)
}

// checkClusterID compares a broker's answer with Config.ClusterID.
func (c *Client) checkClusterID(got *string, from string) error {
	if c.cfg.ClusterID == "" {
		return nil
	}
	if got == nil || *got != c.cfg.ClusterID {
		g := "(none)"
		if got != nil {
			g = strconv.Quote(*got)
		}
		return fmt.Errorf("%w: %s answered cluster id %s, configured %q", ErrClusterMismatch, from, g, c.cfg.ClusterID)
	}
	return nil
}

// password returns the configured password, from PasswordFile when set.
func (s SASLConfig) password() (string, error) {
	if s.PasswordFile == "" {
		return s.Password, nil
	}
	b, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("cluster: sasl.password_file: %w", err)
	}
	p := strings.TrimRight(string(b), "\r\n")
	if p == "" {
		return "", fmt.Errorf("cluster: sasl.password_file %s is empty", s.PasswordFile)
	}
	return p, nil
}

// kgoMechanism returns the franz-go SASL mechanism; the password is read
// at every authentication.
func (s SASLConfig) kgoMechanism() sasl.Mechanism {
	switch s.mechanism() {
	case MechanismPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			p, err := s.password()
			return plain.Auth{User: s.Username, Pass: p}, err
		})
	case MechanismScramSHA512:
		return scram.Sha512(func(context.Context) (scram.Auth, error) {
			p, err := s.password()
			return scram.Auth{User: s.Username, Pass: p}, err
		})
	default:
		return scram.Sha256(func(context.Context) (scram.Auth, error) {
			p, err := s.password()
			return scram.Auth{User: s.Username, Pass: p}, err
		})
	}
}

// config builds the tls.Config (TLS 1.2 or later).
func (t TLSConfig) config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, for tests
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster: tls.ca_file %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: tls.cert_file/tls.key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// kgoLogger passes franz-go's warnings and errors to slog.
type kgoLogger struct{ l *slog.Logger }

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	k.l.Log(context.Background(), lvl, "kafka client: "+msg, keyvals...)
}

// groupVersionCaps are the newest versions of everything, but for the
// group APIs ForwardGroup sends: the classic protocol's versions before
// OffsetCommit and OffsetFetch name topics by id (v10, KIP-848's), whose
// answers a relay by name could not match.
func groupVersionCaps() *kversion.Versions {
	all := kmsg.NewPtrApiVersionsResponse() // every request franz-go's kmsg knows, at its newest version
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if r := kmsg.RequestForKey(key); r != nil {
			all.ApiKeys = append(all.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MaxVersion: r.MaxVersion()})
		}
	}
	v := kversion.FromApiVersionsResponse(all)
	for key, max := range map[kmsg.Key]int16{kmsg.JoinGroup: 9, kmsg.SyncGroup: 5, kmsg.Heartbeat: 4, kmsg.LeaveGroup: 5,
		kmsg.OffsetCommit: 8, kmsg.OffsetFetch: 8, kmsg.ListGroups: 5, kmsg.DescribeGroups: 5, kmsg.DeleteGroups: 2, kmsg.OffsetDelete: 0} {
		v.SetMaxKeyVersion(int16(key), max)
	}
	return v
}

// ForwardGroup sends a consumer group request (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
// DescribeGroups, DeleteGroups, OffsetDelete) to the coordinator of its
// group in the cluster (ListGroups to every broker, DescribeGroups and
// DeleteGroups to each group's coordinator, the answers merged), finding
// it and following NOT_COORDINATOR as franz-go does, and returns the
// answer. The version sent is the newest both sides support, up to
// groupVersionCaps; it is bound
// by ctx only, as a JoinGroup waits up to its rebalance timeout. Errors:
// the cluster could not be reached or did not answer (wrapped).
func (c *Client) ForwardGroup(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, err := c.kcl.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
