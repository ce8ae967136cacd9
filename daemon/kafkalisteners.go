package daemon

import (
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/internal/tlsreload"
	"github.com/tierd/tierd/listener"
)

// kafkaListeners builds the Kafka listeners of cfg's endpoints, with the
// SASL logins (a credentials file, reloaded on SIGHUP, or relayed to the
// cluster), acls and shared (the group coordinator) shared by all.
func (d *Parts) kafkaListeners(cfg config.Config, log *slog.Logger, rl *Reloader, tlsH *tlsreload.Holder, acls *authz.Authorizer, shared ...listener.Option) ([]*listener.Server, error) {
	endpoints, err := cfg.KafkaEndpoints() // checked by validate
	if err != nil {
		return nil, err
	}
	var loginOpt []listener.Option // the SASL logins, shared by the SASL listeners
	switch {
	case len(endpoints) == 0:
	case cfg.Kafka.Listener.SASL() && cfg.Kafka.Logins.SASLCredentialsFile != "":
		logins, err := newLogins(cfg)
		if err != nil {
			return nil, err
		}
		rl.Register("sasl credentials", func(c config.Config) error { return logins.reload(c) })
		loginOpt = append(loginOpt, listener.WithSASL(logins.Local))
	case cfg.Kafka.Listener.SASL():
		relay, err := newRelay(cfg, d)
		if err != nil {
			return nil, err
		}
		log.Info("Kafka listener logins are checked by the Kafka cluster (no sasl.credentials.file)", "mechanisms", cfg.Kafka.Listener.SASLEnabledMechanisms)
		warnRelayPlaintext(cfg, log)
		loginOpt = append(loginOpt, listener.WithSASL(relay))
	}
	var out []*listener.Server
	for _, ep := range endpoints {
		kl, err := d.endpointListener(cfg, log, ep, len(endpoints) > 1, tlsH, loginOpt, acls, shared)
		if err != nil {
			return nil, err
		}
		out = append(out, kl)
	}
	return out, nil
}

// endpointListener builds the Kafka listener of ep: TLS for SSL and
// SASL_SSL, the logins for SASL_PLAINTEXT and SASL_SSL, the ACLs for
// every one. With several listeners (labelled), each's metrics carry a
// listener label and its log lines the listener's name.
func (d *Parts) endpointListener(cfg config.Config, log *slog.Logger, ep listener.Endpoint, labelled bool, tlsH *tlsreload.Holder,
	logins []listener.Option, acls *authz.Authorizer, shared []listener.Option) (*listener.Server, error) {
	lcfg := cfg
	lcfg.Kafka.Listener.Listen, lcfg.Kafka.Listener.Advertised = ep.Listen, ep.Advertised
	opts := append([]listener.Option(nil), shared...)
	if ep.Protocol.TLS() {
		opts = append(opts, listener.WithTLS(serverTLS(tlsH, cfg.TLS.Kafka)))
	}
	if ep.Protocol.SASL() {
		opts = append(opts, logins...)
	} else {
		lcfg.Kafka.Listener.SASLEnabledMechanisms = nil
	}
	l := log.With("protocol", string(ep.Protocol))
	if labelled {
		l = l.With("listener", ep.Name)
		opts = append(opts, listener.WithRegisterer(prometheus.WrapRegistererWith(prometheus.Labels{"listener": ep.Name}, d.Registerer)))
	}
	switch {
	case acls != nil:
		opts = append(opts, listener.WithAuthorizer(acls))
	case cfg.OpenEndpoint(ep):
		l.Warn("the Kafka listener authenticates nobody and applies no ACLs beyond loopback (allow.unauthenticated): every client that reaches it reads every topic it serves",
			"listen", ep.Listen)
	default:
		l.Warn("the Kafka listener applies no ACLs: every client that reaches it reads every topic it serves; set acls (docs/security.md) to apply Kafka's",
			"listen", ep.Listen) // l says the protocol
	}
	return d.KafkaListener(lcfg, l, "", opts...)
}

// kafkaListenersText names the Kafka listeners for the start line:
// NAME://host:port each, "" for none.
func kafkaListenersText(cfg config.Config) string {
	eps, _ := cfg.KafkaEndpoints()
	var out []string
	for _, e := range eps {
		out = append(out, e.Name+"://"+e.Listen)
	}
	return strings.Join(out, ",")
}
