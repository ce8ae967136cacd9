package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/tierd/tierd/fetch"
	"github.com/tierd/tierd/internal/tlsreload"
)

// TLS modes of one endpoint.
const (
	tlsOff  = "off"  // plaintext
	tlsOn   = "tls"  // TLS; clients are not asked for a certificate
	tlsMTLS = "mtls" // TLS, and a client certificate chaining to client_ca_file is required
)

// tlsConfig is the tls: section: TLS for tierd's own endpoints (the gRPC
// API on fetch.listen, the HTTP endpoint on http.listen, the Kafka
// listener on kafka.listen and the RSM endpoint on rsm.listen), with one
// certificate, each endpoint turned
// on by itself; and how tierd's tools reach a TLS gRPC API. (The client
// TLS of the Kafka cluster tierd asks is kafka.tls; the object store's CA
// is bucket.minio.ca_file or bucket.s3.ca_file.) The files are read at
// start and again on SIGHUP.
type tlsConfig struct {
	// CertFile is the PEM certificate chain (leaf first) every TLS endpoint
	// presents. Required when an endpoint is not off. Default "".
	CertFile string `yaml:"cert_file"`
	// KeyFile is CertFile's PEM private key. Default "".
	KeyFile string `yaml:"key_file"`
	// ClientCAFile is a PEM file of the CA certificates client
	// certificates must chain to on the mtls endpoints; required by them,
	// and refused when no endpoint is mtls. Default "".
	ClientCAFile string `yaml:"client_ca_file"`
	// GRPC, HTTP, Kafka and RSM are each endpoint's mode: off
	// (plaintext), tls, or mtls (Kafka's ssl.client.auth=required). Default
	// off.
	GRPC  string `yaml:"grpc"`
	HTTP  string `yaml:"http"`
	Kafka string `yaml:"kafka"`
	RSM   string `yaml:"rsm"`
	// CAFile is the PEM file of the CA certificates tierd's tools
	// (segments, journal, topics delete, partitions restore) trust for the
	// gRPC API when grpc is not off. Default "": the system's roots.
	CAFile string `yaml:"ca_file"`
	// ClientCertFile and ClientKeyFile are the certificate and key the
	// tools present when grpc is mtls; both or neither. Default "".
	ClientCertFile string `yaml:"client_cert_file"`
	ClientKeyFile  string `yaml:"client_key_file"`
	// ServerName is the name the tools check the gRPC API's certificate
	// for. Default "": the host of fetch.listen.
	ServerName string `yaml:"server_name"`
}

// mode returns an endpoint's mode, "" meaning off.
func mode(m string) string {
	if m == "" {
		return tlsOff
	}
	return m
}

// anyOn reports whether an endpoint uses TLS.
func (c tlsConfig) anyOn() bool {
	return mode(c.GRPC) != tlsOff || mode(c.HTTP) != tlsOff || mode(c.Kafka) != tlsOff || mode(c.RSM) != tlsOff
}

// validate reports every problem at once; it reads no file.
func (c tlsConfig) validate() error {
	var errs []error
	mtls := false
	for _, e := range []struct{ name, mode string }{{"grpc", c.GRPC}, {"http", c.HTTP}, {"kafka", c.Kafka}, {"rsm", c.RSM}} {
		switch mode(e.mode) {
		case tlsOff, tlsOn:
		case tlsMTLS:
			mtls = true
		default:
			errs = append(errs, fmt.Errorf("tls: %s %q: want off, tls or mtls", e.name, e.mode))
		}
	}
	if c.anyOn() && (c.CertFile == "" || c.KeyFile == "") {
		errs = append(errs, errors.New("tls: cert_file and key_file are required when grpc, http, kafka or rsm is tls or mtls"))
	}
	if !c.anyOn() && (c.CertFile != "" || c.KeyFile != "") {
		errs = append(errs, errors.New("tls: cert_file or key_file is set but grpc, http, kafka and rsm are all off"))
	}
	if mtls && c.ClientCAFile == "" {
		errs = append(errs, errors.New("tls: client_ca_file is required by an mtls endpoint (the CAs client certificates must chain to)"))
	}
	if !mtls && c.ClientCAFile != "" {
		errs = append(errs, errors.New("tls: client_ca_file is set but no endpoint is mtls, so no client certificate would be checked"))
	}
	if (c.ClientCertFile == "") != (c.ClientKeyFile == "") {
		errs = append(errs, errors.New("tls: client_cert_file and client_key_file go together"))
	}
	return errors.Join(errs...)
}

// tlsHolder loads the certificate when an endpoint uses TLS; nil when none
// does. The start fails on a file that cannot be used.
func tlsHolder(c tlsConfig, log *slog.Logger) (*tlsreload.Holder, error) {
	if !c.anyOn() {
		return nil, nil
	}
	h, err := tlsreload.New(tlsreload.Files{CertFile: c.CertFile, KeyFile: c.KeyFile, ClientCAFile: c.ClientCAFile})
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	logCertificate(log, h, "tls: certificate loaded")
	return h, nil
}

// logCertificate logs the certificate's subject and expiry, as a warning
// when it expires within a week.
func logCertificate(log *slog.Logger, h *tlsreload.Holder, msg string) {
	leaf := h.Leaf()
	attrs := []any{"cert_file", h.Files().CertFile, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339)}
	if time.Until(leaf.NotAfter) < 7*24*time.Hour {
		log.Warn(msg+"; it expires within a week", attrs...)
		return
	}
	log.Info(msg, attrs...)
}

// serverTLS returns the server config of an endpoint in mode m, or nil
// for off (or no holder).
func serverTLS(h *tlsreload.Holder, m string) *tls.Config {
	if h == nil || mode(m) == tlsOff {
		return nil
	}
	return h.ServerConfig(mode(m) == tlsMTLS)
}

// reloadTLS reads the certificate files again (a part of every config
// reload: SIGHUP, tierd config reload); on an error the endpoints keep the
// certificate they have. A nil holder does nothing.
func reloadTLS(h *tlsreload.Holder, log *slog.Logger) error {
	if h == nil {
		return nil
	}
	if err := h.Reload(); err != nil {
		log.Error("tls: reload failed; keeping the certificate in use", "err", err)
		return err
	}
	logCertificate(log, h, "tls: certificate reloaded")
	return nil
}

// tlsRefusal explains why a tool's TLS connection to the gRPC API failed:
// it returns nil when tls.grpc is off or nothing listens at
// cfg.Fetch.Listen (no tierd runs), and otherwise the error of one TLS
// handshake with the tools' settings, naming them.
func tlsRefusal(cfg config) error {
	if mode(cfg.TLS.GRPC) == tlsOff {
		return nil
	}
	t := cfg.TLS
	tc, err := tlsreload.ClientConfig(tlsreload.ClientFiles{CAFile: t.CAFile, CertFile: t.ClientCertFile, KeyFile: t.ClientKeyFile, ServerName: t.ServerName})
	if err != nil {
		return fmt.Errorf("tls: the tools' client settings: %w", err)
	}
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(cfg.Fetch.Listen)
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: tc}
	conn, err := d.Dial("tcp", cfg.Fetch.Listen)
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return nil // nothing listens: tierd is not running
	}
	if err != nil {
		return fmt.Errorf("a server answers at %s (fetch.listen) but the TLS handshake failed; check tls.ca_file, tls.client_cert_file, tls.client_key_file and tls.server_name: %w",
			cfg.Fetch.Listen, err)
	}
	conn.Close()
	return nil
}

// dialTierd connects a tool to the gRPC API at cfg.Fetch.Listen, over TLS
// when tls.grpc is not off (trusting tls.ca_file, presenting
// tls.client_cert_file).
//
// With fetch.client.token_file, every call carries its token.
func dialTierd(cfg config) (*fetch.Client, error) {
	var opts []fetch.DialOption
	tok, err := clientToken(cfg)
	if err != nil {
		return nil, err
	}
	t := cfg.TLS
	if tok != "" {
		// Over plaintext whoever listens at fetch.listen would read it:
		// on loopback too, any local user who binds the port while tierd
		// is stopped. Over TLS the server's certificate is checked first.
		if mode(t.GRPC) == tlsOff {
			return nil, errors.New("fetch: client.token_file: a token goes to fetch.listen only over TLS (tls.grpc: tls or mtls, and tls.ca_file): over plaintext whoever listens at the address could read it")
		}
		opts = append(opts, fetch.WithToken(tok))
	}
	if mode(t.GRPC) == tlsOff {
		return fetch.Dial(cfg.Fetch.Listen, opts...)
	}
	tc, err := tlsreload.ClientConfig(tlsreload.ClientFiles{CAFile: t.CAFile, CertFile: t.ClientCertFile, KeyFile: t.ClientKeyFile, ServerName: t.ServerName})
	if err != nil {
		return nil, fmt.Errorf("tls: the tools' client settings: %w", err)
	}
	return fetch.Dial(cfg.Fetch.Listen, append(opts, fetch.WithClientTLS(tc))...)
}
