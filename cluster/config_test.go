package cluster

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	d := DefaultConfig()
	if d.Enabled() || d.ClientID != "tierd" || d.RequestTimeout != 10*time.Second {
		t.Errorf("defaults %+v: want disabled, client id tierd, 10s", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	const secret = "hunter2-secret"
	base := func() Config {
		c := DefaultConfig()
		c.BootstrapServers = []string{"kafka-1:9092", "10.0.0.2:9093", "[::1]:9094"}
		return c
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want []string // each must appear; nil means valid
	}{
		{"valid", func(*Config) {}, nil},
		{"valid scram with file", func(c *Config) {
			c.SASL = SASLConfig{Mechanism: "scram-sha-512", Username: "u", PasswordFile: "/run/secrets/pw"}
		}, nil},
		{"valid tls", func(c *Config) {
			c.TLS = TLSConfig{Enabled: true, CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem", ServerName: "kafka"}
		}, nil},
		{"bad addresses", func(c *Config) { c.BootstrapServers = []string{"kafka-1", ":9092", "h:0", "h:99999", "h:x"} },
			[]string{`[0] "kafka-1": want host:port`, `[1] ":9092": empty host`, `[2] "h:0": port`, `[3] "h:99999": port`, `[4] "h:x": port`}},
		{"empty client id and timeout", func(c *Config) { c.ClientID = ""; c.RequestTimeout = 0 },
			[]string{"client_id is empty", "request_timeout 0s must be positive"}},
		{"unknown mechanism", func(c *Config) { c.SASL = SASLConfig{Mechanism: "GSSAPI", Username: "u", Password: secret} },
			[]string{`sasl.mechanism "GSSAPI"`}},
		{"mechanism without user or password", func(c *Config) { c.SASL = SASLConfig{Mechanism: "PLAIN"} },
			[]string{"sasl.username is required", "exactly one of sasl.password and sasl.password_file"}},
		{"both password and file", func(c *Config) {
			c.SASL = SASLConfig{Mechanism: "SCRAM-SHA-256", Username: "u", Password: secret, PasswordFile: "f"}
		}, []string{"exactly one of"}},
		{"password without mechanism", func(c *Config) { c.SASL = SASLConfig{Username: "u", Password: secret} },
			[]string{"without sasl.mechanism"}},
		{"cert without key", func(c *Config) { c.TLS = TLSConfig{Enabled: true, CertFile: "c.pem"} },
			[]string{"tls.cert_file and tls.key_file go together"}},
		{"tls settings but off", func(c *Config) { c.TLS = TLSConfig{CAFile: "ca.pem"} },
			[]string{"tls.enabled is false"}},
		{"no cluster, other settings still checked", func(c *Config) { c.BootstrapServers = nil; c.RequestTimeout = -time.Second },
			[]string{"request_timeout -1s"}},
		{"all at once", func(c *Config) {
			c.BootstrapServers = []string{"x"}
			c.ClientID = ""
			c.SASL = SASLConfig{Mechanism: "PLAIN", Password: secret}
			c.TLS = TLSConfig{KeyFile: "k"}
		}, []string{"bootstrap_servers[0]", "client_id", "sasl.username", "tls.cert_file", "tls.enabled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mod(&c)
			err := c.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid config accepted, want %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the password: %q", err)
			}
			if got, want := strings.Count(err.Error(), "cluster: "), len(tc.want); got < want {
				t.Errorf("%d problems reported, want at least %d: %q", got, want, err)
			}
		})
	}
}
