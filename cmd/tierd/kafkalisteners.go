package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/internal/tlsreload"
	"github.com/tierd/tierd/listener"
)

// kafkaListeners are Kafka's names for several listeners, each with its
// security protocol (KIP-103), in the kafka: section beside listen.
type kafkaListeners struct {
	// Listeners is Kafka's listeners setting: "NAME://host:port,..."
	// (listener.ParseListeners); it replaces listen and advertised.
	// SASL_PLAINTEXT and SASL_SSL listeners take sasl.enabled.mechanisms'
	// logins; SSL and SASL_SSL use tls.kafka (tls or mtls). Each listener
	// has its own connection limits and fetch.response.memory.bytes.
	// Default "": one listener, on listen.
	Listeners string `yaml:"listeners"`
	// AdvertisedListeners is Kafka's advertised.listeners: what Metadata
	// gives the clients of each listener named. Default "": each its bound
	// address.
	AdvertisedListeners string `yaml:"advertised.listeners"`
	// ProtocolMap is Kafka's listener.security.protocol.map,
	// "NAME:PROTOCOL,...", for listeners not named after their protocol.
	// Default "".
	ProtocolMap string `yaml:"listener.security.protocol.map"`
}

// kafkaEndpoints are the Kafka listeners c serves: those of listeners,
// or the one of listen (its protocol from sasl.enabled.mechanisms and
// tls.kafka), or none.
func (c config) kafkaEndpoints() ([]listener.Endpoint, error) {
	l := c.Kafka.Listeners
	if l.Listeners != "" {
		return listener.ParseListeners(l.Listeners, l.AdvertisedListeners, l.ProtocolMap)
	}
	if c.Kafka.Listener.Listen == "" {
		return nil, nil
	}
	p := listener.Plaintext
	switch tlsOn := mode(c.TLS.Kafka) != tlsOff; {
	case c.Kafka.Listener.SASL() && tlsOn:
		p = listener.SASLSSL
	case c.Kafka.Listener.SASL():
		p = listener.SASLPlaintext
	case tlsOn:
		p = listener.SSL
	}
	return []listener.Endpoint{{Name: string(p), Protocol: p, Listen: c.Kafka.Listener.Listen, Advertised: c.Kafka.Listener.Advertised}}, nil
}

// openEndpoint reports whether e would serve beyond loopback with nobody
// authenticated (no SASL, no client certificate) and no ACLs.
func (c config) openEndpoint(e listener.Endpoint) bool {
	return !loopbackOnly(e.Listen) && !e.Protocol.SASL() && !(e.Protocol.TLS() && mode(c.TLS.Kafka) == tlsMTLS) && c.ACLs.Source == ""
}

// validateListeners reports the problems of the Kafka listeners' settings
// together.
func (c config) validateListeners() []error {
	var errs []error
	l := c.Kafka.Listeners
	if l.Listeners == "" {
		if l.AdvertisedListeners != "" || l.ProtocolMap != "" {
			errs = append(errs, errors.New("kafka: advertised.listeners and listener.security.protocol.map need listeners"))
		}
	} else if c.Kafka.Listener.Listen != "" || c.Kafka.Listener.Advertised != "" {
		errs = append(errs, errors.New("kafka: listeners replaces listen and advertised: set one or the other"))
	}
	eps, err := c.kafkaEndpoints()
	if err != nil {
		return append(errs, fmt.Errorf("kafka: %w", err))
	}
	sasl, tlsEP := false, false
	for _, e := range eps {
		sasl = sasl || e.Protocol.SASL()
		tlsEP = tlsEP || e.Protocol.TLS()
		if e.Protocol.SASL() && !c.Kafka.Listener.SASL() {
			errs = append(errs, fmt.Errorf("kafka: listener %s is %s: it needs sasl.enabled.mechanisms", e.Name, e.Protocol))
		}
		if e.Protocol.TLS() && mode(c.TLS.Kafka) == tlsOff {
			errs = append(errs, fmt.Errorf("kafka: listener %s is %s: it needs tls.kafka: tls or mtls (and tls.cert_file)", e.Name, e.Protocol))
		}
		if c.openEndpoint(e) && !c.Kafka.Logins.AllowUnauthenticated {
			errs = append(errs, fmt.Errorf("kafka: listener %s on %s reaches beyond loopback, but authenticates nobody and applies no ACLs: "+
				"make it SASL_PLAINTEXT or SASL_SSL, set tls.kafka: mtls or acls (docs/security.md), or allow.unauthenticated: true to serve every topic to anyone who connects",
				e.Name, e.Listen))
		}
	}
	if l.Listeners != "" && c.Kafka.Listener.SASL() && !sasl {
		errs = append(errs, errors.New("kafka: sasl.enabled.mechanisms is set but no listener is SASL_PLAINTEXT or SASL_SSL"))
	}
	if l.Listeners != "" && mode(c.TLS.Kafka) != tlsOff && !tlsEP {
		errs = append(errs, errors.New("kafka: tls.kafka is on but no listener is SSL or SASL_SSL"))
	}
	return errs
}

// kafkaListeners builds the Kafka listeners of cfg's endpoints, with the
// SASL logins (a credentials file, reloaded on SIGHUP, or relayed to the
// cluster) and acls shared by all.
func (d *daemon) kafkaListeners(cfg config, log *slog.Logger, rl *reloader, tlsH *tlsreload.Holder, acls *authz.Authorizer) ([]*listener.Server, error) {
	endpoints, err := cfg.kafkaEndpoints() // checked by validate
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
		rl.Register("sasl credentials", func(c config) error { return logins.reload(c) })
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
		kl, err := d.endpointListener(cfg, log, ep, len(endpoints) > 1, tlsH, loginOpt, acls)
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
func (d *daemon) endpointListener(cfg config, log *slog.Logger, ep listener.Endpoint, labelled bool, tlsH *tlsreload.Holder,
	logins []listener.Option, acls *authz.Authorizer) (*listener.Server, error) {
	lcfg := cfg
	lcfg.Kafka.Listener.Listen, lcfg.Kafka.Listener.Advertised = ep.Listen, ep.Advertised
	var opts []listener.Option
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
		opts = append(opts, listener.WithRegisterer(prometheus.WrapRegistererWith(prometheus.Labels{"listener": ep.Name}, d.reg)))
	}
	switch {
	case acls != nil:
		opts = append(opts, listener.WithAuthorizer(acls))
	case cfg.openEndpoint(ep):
		l.Warn("the Kafka listener authenticates nobody and applies no ACLs beyond loopback (allow.unauthenticated): every client that reaches it reads every topic it serves",
			"listen", ep.Listen, "protocol", ep.Protocol)
	default:
		l.Warn("the Kafka listener applies no ACLs: every client that reaches it reads every topic it serves; set acls (docs/security.md) to apply Kafka's",
			"listen", ep.Listen, "protocol", ep.Protocol)
	}
	return d.kafkaListener(lcfg, l, "", opts...)
}

// kafkaListenersText names the Kafka listeners for the start line:
// NAME://host:port each, "" for none.
func kafkaListenersText(cfg config) string {
	eps, _ := cfg.kafkaEndpoints()
	var out []string
	for _, e := range eps {
		out = append(out, e.Name+"://"+e.Listen)
	}
	return strings.Join(out, ",")
}
