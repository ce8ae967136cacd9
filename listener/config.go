package listener

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/saturate"
	"github.com/tierd/tierd/listener/groups"
)

// Config configures the Kafka protocol listener. The yaml names follow
// Kafka's broker settings where one exists (socket.request.max.bytes,
// max.connections, connections.max.idle.ms, fetch.max.bytes); tierd's
// configuration file embeds them inline in its kafka: section, next to the
// cluster client's keys (bootstrap_servers, client_id, request_timeout,
// cluster_id, sasl, tls), which no key here reuses.
type Config struct {
	// Listen is the host:port to accept Kafka clients on; "" turns the
	// listener off. Default "" (off), so several tierds can share a host;
	// tierd's example configuration uses 127.0.0.1:9192.
	Listen string `yaml:"listen"`
	// Advertised is the host:port that Metadata gives clients for the one
	// broker tierd presents. Default "": the listen address as bound (so
	// port 0 becomes the port chosen), with an unspecified host (empty,
	// 0.0.0.0 or ::) replaced by 127.0.0.1; set it whenever clients on
	// other hosts connect.
	Advertised string `yaml:"advertised"`
	// SocketRequestMaxBytes is the largest request frame accepted, bytes
	// (after the 4-byte size); a larger frame closes the connection.
	// Default 104857600 (Kafka's socket.request.max.bytes).
	SocketRequestMaxBytes int32 `yaml:"socket.request.max.bytes"`
	// MaxConnections is the most client connections open at once; a
	// connection past it is accepted and closed at once. Default 1000.
	MaxConnections int `yaml:"max.connections"`
	// ConnectionsMaxIdleMs closes a connection that sends nothing for this
	// long between requests, or stalls this long inside a request frame,
	// ms; it also bounds how long writing one response may take.
	// Default 600000 (Kafka's connections.max.idle.ms); 9223372036854775807
	// (Long.MAX_VALUE) means never.
	ConnectionsMaxIdleMs int64 `yaml:"connections.max.idle.ms"`
	// FetchMaxBytes caps a Fetch request's max_bytes, bytes (Kafka's
	// fetch.max.bytes). Default 52428800.
	FetchMaxBytes int32 `yaml:"fetch.max.bytes"`
	// FetchResponseMemoryBytes bounds, for all connections together, the
	// bytes Fetch responses may hold at once, bytes: a Fetch reserves
	// twice the records it may return (the records read, and the response
	// buffer they are encoded into) before it reads, at most this much,
	// and gives it back once its response is written. A Fetch that cannot
	// reserve what it needs within its max_wait_ms answers with no records
	// (the client fetches again), as an empty long poll does. The first
	// batch may exceed a Fetch's share ("at least one batch"). tierd's
	// own setting: a broker sends log files without copying them, tierd
	// copies the remote tier's bytes. Default 268435456 (256 MiB);
	// minimum 1048576.
	FetchResponseMemoryBytes int64 `yaml:"fetch.response.memory.bytes"`
	// FetchPollIntervalMs is how often a Fetch waiting for min_bytes
	// (long polling, up to the request's max_wait_ms) looks for new data,
	// ms: Kafka wakes waiting fetches when data is appended, tierd serves
	// logs that others write and checks their offsets on this interval
	// instead. Default 50.
	FetchPollIntervalMs int64 `yaml:"fetch.poll.interval.ms"`

	// MaxConnectionsPerIP is the most connections open at once from one
	// client address; one past it is accepted and closed at once (Kafka's
	// max.connections.per.ip). Default 2147483647 (no bound but
	// max.connections).
	MaxConnectionsPerIP int `yaml:"max.connections.per.ip"`
	// MaxConnectionsPerIPOverrides sets other bounds for some addresses,
	// in Kafka's form "host:count,host:count" (max.connections.per.ip.overrides;
	// the host an IP address, as connections are counted by address).
	// Default "".
	MaxConnectionsPerIPOverrides string `yaml:"max.connections.per.ip.overrides"`
	// ResponseWriteTimeoutMs bounds how long writing one response may take,
	// ms: a client that stops reading its socket has its connection closed
	// then, and the memory its response held goes back (fetch.response.memory.bytes).
	// tierd's own setting. Default 30000.
	ResponseWriteTimeoutMs int64 `yaml:"response.write.timeout.ms"`

	// SSLPrincipalMappingRules maps a verified client certificate's subject
	// (its distinguished name, RFC 2253) to the principal's name, in
	// Kafka's syntax (ssl.principal.mapping.rules: "RULE:pattern/replacement/[LU],
	// ..., DEFAULT"; the patterns Go regular expressions); a certificate
	// no rule applies to is refused. Default "DEFAULT": the name itself.
	SSLPrincipalMappingRules string `yaml:"ssl.principal.mapping.rules"`

	// SASLEnabledMechanisms are the SASL mechanisms clients must log in
	// with (Kafka's sasl.enabled.mechanisms: PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512): set, the listener is SASL_PLAINTEXT, or SASL_SSL
	// with TLS, and answers nothing but ApiVersions and the SASL exchange
	// before a client has logged in (WithSASL gives the credentials).
	// Default none: no SASL.
	SASLEnabledMechanisms []string `yaml:"sasl.enabled.mechanisms"`
	// SASLServerMaxReceiveSize is the largest request frame accepted
	// before a client has logged in, bytes (Kafka's
	// sasl.server.max.receive.size). Default 524288.
	SASLServerMaxReceiveSize int32 `yaml:"sasl.server.max.receive.size"`
	// SASLAuthenticationTimeoutMs bounds, from its accept, how long a
	// connection may take to log in, ms; it is closed then. tierd's own
	// setting. Default 10000.
	SASLAuthenticationTimeoutMs int64 `yaml:"sasl.authentication.timeout.ms"`
	// SASLMaxInflightLoginsPerIP bounds the SASL steps running at once for
	// one client address (a PLAIN step hashes the password); a login past
	// it fails at once, as a wrong password does. tierd's own setting.
	// Default 4.
	SASLMaxInflightLoginsPerIP int `yaml:"sasl.max.inflight.logins.per.ip"`
	// ConnectionsMaxReauthMs is the longest a login lasts, ms (KIP-368,
	// Kafka's connections.max.reauth.ms): a client that has not logged in
	// again by then (it is told the lifetime in SaslAuthenticate v1+) has
	// its connection closed at its next request. 0 (default): a login
	// lasts as long as its connection.
	ConnectionsMaxReauthMs int64 `yaml:"connections.max.reauth.ms"`
	// ConnectionFailedAuthenticationDelayMs delays the answer to a failed
	// login before the connection is closed, ms (Kafka's
	// connection.failed.authentication.delay.ms); tierd multiplies it by
	// the failures from the same address in the minute since its first counted one, up to 50
	// times. Default 100.
	ConnectionFailedAuthenticationDelayMs int64 `yaml:"connection.failed.authentication.delay.ms"`

	// GroupCoordinatorEnable serves consumer groups (FindCoordinator,
	// JoinGroup, OffsetCommit, ...), as GroupCoordinator says (tierd's own
	// setting). Default true; false: only assign-style consumers read (the
	// group APIs are not advertised).
	GroupCoordinatorEnable bool `yaml:"group.coordinator.enable"`
	// GroupCoordinator says where groups live: "local", tierd is the
	// coordinator of every group and keeps the committed offsets in its
	// metadata dir; "cluster", the group protocol is relayed to the Kafka
	// cluster's coordinators (kafka.bootstrap_servers), so groups and
	// offsets are the cluster's, shared by every tierd and broker of it;
	// "auto", cluster when a cluster is configured, local otherwise
	// (tierd's own setting). Default auto.
	GroupCoordinator string `yaml:"group.coordinator"`
	// Groups are the group coordinator's settings (Kafka's group.* and
	// offsets.* broker settings).
	Groups groups.Config `yaml:",inline"`
}

// SASL reports whether clients must log in (SASLEnabledMechanisms set).
func (c Config) SASL() bool { return len(c.SASLEnabledMechanisms) > 0 }

// The values of group.coordinator.
const (
	GroupsAuto    = "auto"
	GroupsLocal   = "local"
	GroupsCluster = "cluster"
)

// DefaultConfig returns the defaults: the listener off.
func DefaultConfig() Config {
	return Config{
		SocketRequestMaxBytes:    104857600,
		MaxConnections:           1000,
		ConnectionsMaxIdleMs:     600000,
		FetchMaxBytes:            52428800,
		FetchResponseMemoryBytes: 268435456,
		FetchPollIntervalMs:      50,

		MaxConnectionsPerIP:      2147483647,
		SSLPrincipalMappingRules: "DEFAULT",
		ResponseWriteTimeoutMs:   30000,
		GroupCoordinatorEnable:   true,
		GroupCoordinator:         GroupsAuto,
		Groups:                   groups.DefaultConfig(),

		SASLServerMaxReceiveSize:              524288,
		SASLAuthenticationTimeoutMs:           10000,
		SASLMaxInflightLoginsPerIP:            4,
		ConnectionFailedAuthenticationDelayMs: 100,
	}
}

// Enabled reports whether the listener is on (Listen is set).
func (c Config) Enabled() bool { return c.Listen != "" }

// Validate reports every problem at once. An empty Listen is valid (the
// listener is off); the other fields are checked either way.
func (c Config) Validate() error {
	var errs []error
	switch c.GroupCoordinator {
	case GroupsAuto, GroupsLocal, GroupsCluster:
	default:
		errs = append(errs, fmt.Errorf("listener: group.coordinator %q: want auto, local or cluster", c.GroupCoordinator))
	}
	if c.Listen != "" {
		if err := checkHostPort(c.Listen, true); err != nil {
			errs = append(errs, fmt.Errorf("listener: listen: %w", err))
		}
	}
	if c.Advertised != "" {
		if err := checkHostPort(c.Advertised, false); err != nil {
			errs = append(errs, fmt.Errorf("listener: advertised: %w", err))
		} else if host, _, _ := net.SplitHostPort(c.Advertised); unspecifiedHost(host) {
			errs = append(errs, fmt.Errorf("listener: advertised %q: clients cannot connect to an unspecified host", c.Advertised))
		}
	}
	if c.SocketRequestMaxBytes < 64 {
		errs = append(errs, fmt.Errorf("listener: socket.request.max.bytes %d must be at least 64", c.SocketRequestMaxBytes))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("listener: max.connections %d must be positive", c.MaxConnections))
	}
	if c.ConnectionsMaxIdleMs < 1 {
		errs = append(errs, fmt.Errorf("listener: connections.max.idle.ms %d must be positive", c.ConnectionsMaxIdleMs))
	}
	if c.FetchMaxBytes < 1 {
		errs = append(errs, fmt.Errorf("listener: fetch.max.bytes %d must be positive", c.FetchMaxBytes))
	}
	if c.FetchResponseMemoryBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("listener: fetch.response.memory.bytes %d must be at least 1048576", c.FetchResponseMemoryBytes))
	}
	if c.FetchPollIntervalMs < 1 || c.FetchPollIntervalMs > 10000 {
		errs = append(errs, fmt.Errorf("listener: fetch.poll.interval.ms %d must be from 1 to 10000", c.FetchPollIntervalMs))
	}
	if _, err := kafkaacl.ParsePrincipalRules(c.SSLPrincipalMappingRules); err != nil {
		errs = append(errs, err)
	}
	if c.MaxConnectionsPerIP < 0 {
		errs = append(errs, fmt.Errorf("listener: max.connections.per.ip %d must be 0 or more", c.MaxConnectionsPerIP))
	}
	if _, err := c.perIPOverrides(); err != nil {
		errs = append(errs, err)
	}
	if c.ResponseWriteTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("listener: response.write.timeout.ms %d must be positive", c.ResponseWriteTimeoutMs))
	}
	for _, m := range c.SASLEnabledMechanisms {
		if m != "PLAIN" && m != "SCRAM-SHA-256" && m != "SCRAM-SHA-512" {
			errs = append(errs, fmt.Errorf("listener: sasl.enabled.mechanisms: %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", m))
		}
	}
	if c.SASLServerMaxReceiveSize < 64 {
		errs = append(errs, fmt.Errorf("listener: sasl.server.max.receive.size %d must be at least 64", c.SASLServerMaxReceiveSize))
	}
	if c.SASLAuthenticationTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("listener: sasl.authentication.timeout.ms %d must be positive", c.SASLAuthenticationTimeoutMs))
	}
	if c.SASLMaxInflightLoginsPerIP < 1 {
		errs = append(errs, fmt.Errorf("listener: sasl.max.inflight.logins.per.ip %d must be positive", c.SASLMaxInflightLoginsPerIP))
	}
	if c.ConnectionsMaxReauthMs < 0 {
		errs = append(errs, fmt.Errorf("listener: connections.max.reauth.ms %d must be 0 (none) or positive", c.ConnectionsMaxReauthMs))
	}
	if c.ConnectionFailedAuthenticationDelayMs < 0 || c.ConnectionFailedAuthenticationDelayMs > 60000 {
		errs = append(errs, fmt.Errorf("listener: connection.failed.authentication.delay.ms %d must be from 0 to 60000", c.ConnectionFailedAuthenticationDelayMs))
	}
	if err := c.Groups.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("listener: %w", err))
	}
	return errors.Join(errs...)
}

// idle is ConnectionsMaxIdleMs as a duration, saturating: Kafka's
// Long.MAX_VALUE (and anything past 9223372036854 ms) gives about 292
// years, in effect never, instead of wrapping to a deadline in the past.
func (c Config) idle() time.Duration { return saturate.Millis(c.ConnectionsMaxIdleMs) }

func (c Config) pollInterval() time.Duration { return saturate.Millis(c.FetchPollIntervalMs) }

// checkHostPort checks a host:port; port 0 is allowed only for a listen
// address (the system picks one).
func checkHostPort(addr string, listen bool) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 || (!listen && p == 0) {
		lo := 1
		if listen {
			lo = 0
		}
		return fmt.Errorf("%q: port must be a number from %d to 65535", addr, lo)
	}
	return nil
}

func unspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// advertisedAddr resolves the address Metadata gives: cfg.Advertised, or
// the bound address with an unspecified host replaced by 127.0.0.1. It
// returns the host and port split for the Metadata response.
func advertisedAddr(cfg Config, bound net.Addr) (host string, port int32, replaced bool, err error) {
	addr := cfg.Advertised
	if addr == "" {
		h, p, err := net.SplitHostPort(bound.String())
		if err != nil {
			return "", 0, false, fmt.Errorf("listener: bound address %q: %w", bound, err)
		}
		if unspecifiedHost(h) {
			h, replaced = "127.0.0.1", true
		}
		addr = net.JoinHostPort(h, p)
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false, fmt.Errorf("listener: advertised %q: %w", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, false, fmt.Errorf("listener: advertised %q: bad port", addr)
	}
	return h, int32(n), replaced, nil
}

// perIPOverrides parses MaxConnectionsPerIPOverrides: "host:count,..."
// (Kafka's form), each host an IP address (as connections are counted),
// normalized, each count 0 or more.
func (c Config) perIPOverrides() (map[string]int, error) {
	out := map[string]int{}
	if strings.TrimSpace(c.MaxConnectionsPerIPOverrides) == "" {
		return out, nil
	}
	for _, e := range strings.Split(c.MaxConnectionsPerIPOverrides, ",") {
		e = strings.TrimSpace(e)
		i := strings.LastIndexByte(e, ':')
		if i <= 0 {
			return nil, fmt.Errorf("listener: max.connections.per.ip.overrides: %q: want host:count", e)
		}
		n, err := strconv.Atoi(e[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("listener: max.connections.per.ip.overrides: %q: the count must be 0 or more", e)
		}
		a, err := netip.ParseAddr(strings.Trim(e[:i], "[]"))
		if err != nil {
			return nil, fmt.Errorf("listener: max.connections.per.ip.overrides: %q: the host must be an IP address", e)
		}
		out[a.Unmap().String()] = n
	}
	return out, nil
}

func (c Config) writeTimeout() time.Duration { return saturate.Millis(c.ResponseWriteTimeoutMs) }
