package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/listener/sasl"
)

// newAuthorizer builds the Authorizer of cfg.ACLs over its source: the
// Kafka cluster's ACLs through d's cluster client, or the ACL file.
func newAuthorizer(cfg config.Config, d *Parts, log *slog.Logger) (*authz.Authorizer, error) {
	var src authz.Source = authz.FileSource{Path: cfg.ACLs.File}
	if cfg.ACLs.Source == "cluster" {
		src = d.Kafka
	}
	return authz.New(cfg.ACLs.Config, src, authz.WithLogger(log.With("component", "acls")), authz.WithRegisterer(d.Registerer))
}

// clusterLogins relays the Kafka listener's logins to the Kafka cluster
// (sasl.Relay over cluster.Client.BeginLogin).
type clusterLogins struct{ c *cluster.Client }

func (u clusterLogins) BeginLogin(ctx context.Context, mechanism string) (sasl.UpstreamLogin, error) {
	l, err := u.c.BeginLogin(ctx, mechanism)
	if err != nil {
		return nil, err
	}
	return refusals{l}, nil
}

// refusals makes the cluster's refusal a failed login.
type refusals struct{ *cluster.Login }

func (r refusals) Step(ctx context.Context, msg []byte) ([]byte, error) {
	b, err := r.Login.Step(ctx, msg)
	if errors.Is(err, cluster.ErrLoginRefused) {
		return nil, fmt.Errorf("%w: %w", sasl.ErrAuthenticationFailed, err)
	}
	return b, err
}

// newRelay checks the Kafka listener's logins against the cluster, each
// within the cluster's request_timeout.
func newRelay(cfg config.Config, d *Parts) (*sasl.Relay, error) {
	r, err := sasl.NewRelay(cfg.Kafka.Listener.SASLEnabledMechanisms, clusterLogins{d.Kafka})
	if err != nil {
		return nil, err
	}
	r.Timeout = cfg.Kafka.Cluster.RequestTimeout
	return r, nil
}

// warnRelayPlaintext says at start that relayed PLAIN logins carry the
// clients' passwords to the cluster in the clear when kafka.tls is off,
// even for clients that reached the listener over TLS.
func warnRelayPlaintext(cfg config.Config, log *slog.Logger) {
	if slices.Contains(cfg.Kafka.Listener.SASLEnabledMechanisms, sasl.Plain) && !cfg.Kafka.Cluster.TLS.Enabled {
		log.Warn("PLAIN logins are relayed to the Kafka cluster over plaintext (kafka.tls is off): the clients' passwords cross that network in the clear, whatever tls.kafka says; enable kafka.tls",
			"bootstrap_servers", cfg.Kafka.Cluster.BootstrapServers)
	}
}

// logins are the Kafka listener's SASL credentials, from
// kafka.sasl.credentials.file.
type logins struct {
	*sasl.Local
	file string
}

func newLogins(cfg config.Config) (*logins, error) {
	creds, err := readCredentials(cfg.Kafka.Logins.SASLCredentialsFile)
	if err != nil {
		return nil, err
	}
	l, err := sasl.NewLocal(cfg.Kafka.Listener.SASLEnabledMechanisms, creds)
	if err != nil {
		return nil, err
	}
	return &logins{Local: l, file: cfg.Kafka.Logins.SASLCredentialsFile}, nil
}

// reload reads the credentials file again (a changed path needs a
// restart); a file that does not load changes nothing.
func (l *logins) reload(config.Config) error {
	creds, err := readCredentials(l.file)
	if err != nil {
		return err
	}
	l.SetCredentials(creds)
	return nil
}

// readCredentials reads a credentials file, refusing one that other
// users may read (it holds what a password's guesses are checked
// against) or that its group, other users, or an owner other than this
// process's user or root may write (a line added there is a login:
// internal/privfile).
func readCredentials(path string) (*sasl.Credentials, error) {
	f, err := OpenPrivate(path, "kafka: sasl.credentials.file", true)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	creds, err := sasl.ParseCredentials(f)
	if err != nil {
		return nil, fmt.Errorf("kafka: sasl.credentials.file %s: %w", path, err)
	}
	return creds, nil
}
