package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// TopicConfigKeys are the topic configs Describe asks the cluster for, with
// Kafka's names (Kafka's TopicConfig, KIP-405's RemoteLogManagerConfig and KIP-950's
// disable settings).
var TopicConfigKeys = []string{
	"retention.ms",
	"retention.bytes",
	"local.retention.ms",
	"local.retention.bytes",
	"remote.storage.enable",
	"remote.log.copy.disable",
	"remote.log.delete.on.disable",
	"cleanup.policy",
	"segment.bytes",
	"min.cleanable.dirty.ratio",
	"delete.retention.ms",
}

// SASL mechanisms, spelled as Kafka's sasl.mechanism spells them.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// Config says how to reach the Kafka cluster. Defaults are in
// DefaultConfig; the zero BootstrapServers means "no cluster".
type Config struct {
	// BootstrapServers are "host:port" addresses of one or more brokers,
	// as Kafka's bootstrap.servers. Empty means tierd runs without a
	// cluster (Enabled is false). Default none.
	BootstrapServers []string `yaml:"bootstrap_servers"`
	// ClientID is the client.id sent with every request, seen in the
	// brokers' request logs and quotas. Default "tierd".
	ClientID string `yaml:"client_id"`
	// RequestTimeout bounds each request to the cluster, retries and
	// connection set-up included. Default 10s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// ClusterID, when set, is the cluster id the brokers must answer
	// with (Kafka's cluster.id, as meta.properties in a log dir holds
	// it); a different answer is ErrClusterMismatch and proves nothing.
	// Default "" (not checked here; the caller compares the id returned).
	ClusterID string `yaml:"cluster_id"`
	// SASL authenticates the connection. Default: no SASL.
	SASL SASLConfig `yaml:"sasl"`
	// TLS encrypts the connection. Default: plaintext.
	TLS TLSConfig `yaml:"tls"`
}

// SASLConfig is the SASL authentication of the client.
type SASLConfig struct {
	// Mechanism is "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (case does
	// not matter). "" turns SASL off. Default "".
	Mechanism string `yaml:"mechanism"`
	// Username is the SASL user. Required with a mechanism.
	Username string `yaml:"username"`
	// Password is the SASL password. Exactly one of Password and
	// PasswordFile is required with a mechanism. Never logged, nor shown
	// in an error. Written unquoted as a number (123456, 1.5, 0123) it
	// is that text, as in a Kafka properties file.
	Password string `yaml:"password"`
	// PasswordFile holds the password (trailing line breaks are
	// ignored). It is read by New, to fail early, and again at every
	// authentication, so a rotated password is picked up. Default "".
	PasswordFile string `yaml:"password_file"`
}

// TLSConfig is the TLS set-up of the client.
type TLSConfig struct {
	// Enabled turns TLS on. Default false.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the certificate authorities to trust;
	// empty means the system's. Default "".
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// brokers that require client authentication (ssl.client.auth);
	// both or neither. Default "".
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name to verify the brokers' certificates
	// against; empty means each broker's host. Default "".
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any broker certificate. For tests only.
	// Default false.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// DefaultConfig returns the defaults: no cluster, client id "tierd",
// request timeout 10s, no SASL, no TLS.
func DefaultConfig() Config {
	return Config{ClientID: "tierd", RequestTimeout: 10 * time.Second}
}

// Enabled reports whether a cluster is configured.
func (c Config) Enabled() bool { return len(c.BootstrapServers) > 0 }

// mechanism returns the canonical spelling of the SASL mechanism.
func (s SASLConfig) mechanism() string { return strings.ToUpper(strings.TrimSpace(s.Mechanism)) }

// Validate reports every problem at once. Messages name settings, never
// the values of secrets. A config without bootstrap servers is valid (no
// cluster) but its other settings are still checked.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("cluster: "+format, args...)) }
	for i, s := range c.BootstrapServers {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			add("bootstrap_servers[%d] %q: want host:port", i, s)
			continue
		}
		if host == "" {
			add("bootstrap_servers[%d] %q: empty host", i, s)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			add("bootstrap_servers[%d] %q: port must be 1..65535", i, s)
		}
	}
	if c.ClientID == "" {
		add("client_id is empty")
	}
	if c.RequestTimeout <= 0 {
		add("request_timeout %s must be positive", c.RequestTimeout)
	}
	s := c.SASL
	switch s.mechanism() {
	case "":
		if s.Username != "" || s.Password != "" || s.PasswordFile != "" {
			add("sasl.username, sasl.password or sasl.password_file set without sasl.mechanism")
		}
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		if s.Username == "" {
			add("sasl.username is required with sasl.mechanism %s", s.mechanism())
		}
		if (s.Password == "") == (s.PasswordFile == "") {
			add("exactly one of sasl.password and sasl.password_file is required with sasl.mechanism %s", s.mechanism())
		}
	default:
		add("sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
	}
	t := c.TLS
	if (t.CertFile == "") != (t.KeyFile == "") {
		add("tls.cert_file and tls.key_file go together")
	}
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify) {
		add("tls settings given but tls.enabled is false")
	}
	return errors.Join(errs...)
}
