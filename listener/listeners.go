package listener

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// SecurityProtocol is a Kafka listener's security protocol
// (org.apache.kafka.common.security.auth.SecurityProtocol).
type SecurityProtocol string

// The security protocols a listener may use.
const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// TLS reports whether connections use TLS (SSL, SASL_SSL).
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether clients log in with SASL (SASL_PLAINTEXT,
// SASL_SSL).
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

func parseProtocol(s string) (SecurityProtocol, bool) {
	p := SecurityProtocol(strings.ToUpper(strings.TrimSpace(s)))
	return p, slices.Contains([]SecurityProtocol{Plaintext, SSL, SASLPlaintext, SASLSSL}, p)
}

// Endpoint is one listener as Kafka's broker settings name it: its name,
// security protocol, the host:port it binds (an empty host: every
// interface) and the host:port Metadata advertises ("": the bound
// address, see Config.Advertised).
type Endpoint struct {
	Name       string
	Protocol   SecurityProtocol
	Listen     string
	Advertised string
}

// ParseListeners reads Kafka's listeners, advertised.listeners and
// listener.security.protocol.map settings (KIP-103), in Kafka's form:
//
//	listeners: "PLAINTEXT://127.0.0.1:9192,EXTERNAL://0.0.0.0:9193"
//	advertised.listeners: "EXTERNAL://tierd-1.example.com:9193"
//	listener.security.protocol.map: "EXTERNAL:SASL_SSL"
//
// A listener name is case-insensitive (upper-cased, as Kafka's
// ListenerName.normalised); its protocol is the map's or, when the map
// does not name it, the name itself when that is a security protocol.
// Names and ports must be distinct; an advertised listener must name a
// listener, its host must be set and not 0.0.0.0 or ::. Every problem is
// reported at once.
func ParseListeners(listeners, advertised, protocolMap string) ([]Endpoint, error) {
	var errs []error
	protos := map[string]SecurityProtocol{}
	for _, item := range splitList(protocolMap) {
		name, proto, ok := strings.Cut(item, ":")
		p, known := parseProtocol(proto)
		if !ok || strings.TrimSpace(name) == "" || !known {
			errs = append(errs, fmt.Errorf("listener.security.protocol.map %q: want NAME:PROTOCOL (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", item))
			continue
		}
		protos[strings.ToUpper(strings.TrimSpace(name))] = p
	}
	var out []Endpoint
	ports := map[string]string{}
	for _, item := range splitList(listeners) {
		name, addr, err := splitListener(item, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("listeners: %w", err))
			continue
		}
		p, ok := protos[name]
		if !ok {
			if p, ok = parseProtocol(name); !ok {
				errs = append(errs, fmt.Errorf("listeners: %q: %s is not a security protocol and listener.security.protocol.map does not name it", item, name))
				continue
			}
		}
		if slices.ContainsFunc(out, func(e Endpoint) bool { return e.Name == name }) {
			errs = append(errs, fmt.Errorf("listeners: listener %s is named twice", name))
			continue
		}
		if _, port, _ := net.SplitHostPort(addr); port != "0" {
			if other, dup := ports[port]; dup {
				errs = append(errs, fmt.Errorf("listeners: %s and %s both listen on port %s", other, name, port))
				continue
			}
			ports[port] = name
		}
		out = append(out, Endpoint{Name: name, Protocol: p, Listen: addr})
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("listeners: no listener"))
	}
	seen := map[string]bool{}
	for _, item := range splitList(advertised) {
		name, addr, err := splitListener(item, false)
		if err != nil {
			errs = append(errs, fmt.Errorf("advertised.listeners: %w", err))
			continue
		}
		i := slices.IndexFunc(out, func(e Endpoint) bool { return e.Name == name })
		switch {
		case i < 0:
			errs = append(errs, fmt.Errorf("advertised.listeners: %s is not one of listeners", name))
		case seen[name]:
			errs = append(errs, fmt.Errorf("advertised.listeners: %s is named twice", name))
		default:
			seen[name] = true
			out[i].Advertised = addr
		}
	}
	return out, errors.Join(errs...)
}

// splitList splits a comma-separated setting, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// splitListener reads NAME://host:port.
func splitListener(item string, listen bool) (name, addr string, err error) {
	name, addr, ok := strings.Cut(item, "://")
	name = strings.ToUpper(strings.TrimSpace(name))
	if !ok || name == "" {
		return "", "", fmt.Errorf("%q: want NAME://host:port", item)
	}
	if err := checkHostPort(addr, listen); err != nil {
		return "", "", fmt.Errorf("%s: %w", name, err)
	}
	if host, _, _ := net.SplitHostPort(addr); !listen && unspecifiedHost(host) {
		return "", "", fmt.Errorf("%s: %q: clients cannot connect to an unspecified host", name, addr)
	}
	return name, addr, nil
}
