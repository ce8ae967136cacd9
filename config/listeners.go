package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/tierd/tierd/listener"
)

// Listeners are Kafka's names for several listeners, each with its
// security protocol (KIP-103), in the kafka: section beside listen.
type Listeners struct {
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

// KafkaEndpoints are the Kafka listeners c serves: those of listeners,
// or the one of listen (its protocol from sasl.enabled.mechanisms and
// tls.kafka), or none. The error is listener.ParseListeners'; a config
// that passed Validate has none.
func (c Config) KafkaEndpoints() ([]listener.Endpoint, error) {
	l := c.Kafka.Listeners
	if l.Listeners != "" {
		return listener.ParseListeners(l.Listeners, l.AdvertisedListeners, l.ProtocolMap)
	}
	if c.Kafka.Listener.Listen == "" {
		return nil, nil
	}
	p := listener.Plaintext
	switch tlsOn := Mode(c.TLS.Kafka) != TLSOff; {
	case c.Kafka.Listener.SASL() && tlsOn:
		p = listener.SASLSSL
	case c.Kafka.Listener.SASL():
		p = listener.SASLPlaintext
	case tlsOn:
		p = listener.SSL
	}
	return []listener.Endpoint{{Name: string(p), Protocol: p, Listen: c.Kafka.Listener.Listen, Advertised: c.Kafka.Listener.Advertised}}, nil
}

// OpenEndpoint reports whether e would serve beyond loopback with nobody
// authenticated (no SASL, no client certificate) and no ACLs.
func (c Config) OpenEndpoint(e listener.Endpoint) bool {
	return !LoopbackOnly(e.Listen) && !e.Protocol.SASL() && !(e.Protocol.TLS() && Mode(c.TLS.Kafka) == TLSMTLS) && c.ACLs.Source == ""
}

// LoopbackOnly reports whether listen (host:port) accepts connections
// from this host alone: its host a loopback address or "localhost".
func LoopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// validateListeners reports the problems of the Kafka listeners' settings
// together.
func (c Config) validateListeners() []error {
	var errs []error
	l := c.Kafka.Listeners
	if l.Listeners == "" {
		if l.AdvertisedListeners != "" || l.ProtocolMap != "" {
			errs = append(errs, errors.New("kafka: advertised.listeners and listener.security.protocol.map need listeners"))
		}
	} else if c.Kafka.Listener.Listen != "" || c.Kafka.Listener.Advertised != "" {
		errs = append(errs, errors.New("kafka: listeners replaces listen and advertised: set one or the other"))
	}
	eps, err := c.KafkaEndpoints()
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
		if e.Protocol.TLS() && Mode(c.TLS.Kafka) == TLSOff {
			errs = append(errs, fmt.Errorf("kafka: listener %s is %s: it needs tls.kafka: tls or mtls (and tls.cert_file)", e.Name, e.Protocol))
		}
		if c.OpenEndpoint(e) && !c.Kafka.Logins.AllowUnauthenticated {
			errs = append(errs, fmt.Errorf("kafka: listener %s on %s reaches beyond loopback, but authenticates nobody and applies no ACLs: "+
				"make it SASL_PLAINTEXT or SASL_SSL, set tls.kafka: mtls or acls (docs/security.md), or allow.unauthenticated: true to serve every topic to anyone who connects",
				e.Name, e.Listen))
		}
	}
	if l.Listeners != "" && c.Kafka.Listener.SASL() && !sasl {
		errs = append(errs, errors.New("kafka: sasl.enabled.mechanisms is set but no listener is SASL_PLAINTEXT or SASL_SSL"))
	}
	if l.Listeners != "" && Mode(c.TLS.Kafka) != TLSOff && !tlsEP {
		errs = append(errs, errors.New("kafka: tls.kafka is on but no listener is SSL or SASL_SSL"))
	}
	return errs
}
