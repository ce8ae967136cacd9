package config

import (
	"errors"
	"fmt"
)

// TLS modes of one endpoint (TLS.GRPC, TLS.HTTP, TLS.Kafka, TLS.RSM).
const (
	TLSOff  = "off"  // plaintext
	TLSOn   = "tls"  // TLS; clients are not asked for a certificate
	TLSMTLS = "mtls" // TLS, and a client certificate chaining to client_ca_file is required
)

// TLS is the tls: section: TLS for tierd's own endpoints (the gRPC
// API on fetch.listen, the HTTP endpoint on http.listen, the Kafka
// listener on kafka.listen and the RSM endpoint on rsm.listen), with one
// certificate, each endpoint turned
// on by itself; and how tierd's tools reach a TLS gRPC API. (The client
// TLS of the Kafka cluster tierd asks is kafka.tls; the object store's CA
// is bucket.minio.ca_file or bucket.s3.ca_file.) The files are read at
// start and again on SIGHUP.
type TLS struct {
	// CertFile is the PEM certificate chain (leaf first) every TLS endpoint
	// presents. Required by tierd run when an endpoint is not off (not by
	// the tools, which read only ca_file and the client_* files). Default
	// "".
	CertFile string `yaml:"cert_file"`
	// KeyFile is CertFile's PEM private key. Default "".
	KeyFile string `yaml:"key_file"`
	// ClientCAFile is a PEM file of the CA certificates client
	// certificates must chain to on the mtls endpoints; required by them
	// (in tierd run), and refused when no endpoint is mtls. Default "".
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

// Mode returns an endpoint's mode, TLSOff for "".
func Mode(m string) string {
	if m == "" {
		return TLSOff
	}
	return m
}

// AnyOn reports whether an endpoint uses TLS.
func (c TLS) AnyOn() bool {
	return Mode(c.GRPC) != TLSOff || Mode(c.HTTP) != TLSOff || Mode(c.Kafka) != TLSOff || Mode(c.RSM) != TLSOff
}

// Validate reports every problem at once, joined; it reads no file. It
// checks what both sides of the section need: the modes, the files that
// go in pairs, and no file that nothing would use. What only the server
// needs (cert_file and key_file for an endpoint that is not off,
// client_ca_file for an mtls one) is ValidateServe's: a tool's config
// (segments, journal, status...) names only the CA it trusts, and its
// own certificate when the gRPC API is mtls.
func (c TLS) Validate() error {
	var errs []error
	mtls := false
	for _, e := range []struct{ name, mode string }{{"grpc", c.GRPC}, {"http", c.HTTP}, {"kafka", c.Kafka}, {"rsm", c.RSM}} {
		switch Mode(e.mode) {
		case TLSOff, TLSOn:
		case TLSMTLS:
			mtls = true
		default:
			errs = append(errs, fmt.Errorf("tls: %s %q: want off, tls or mtls", e.name, e.mode))
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("tls: cert_file and key_file go together"))
	}
	if !c.AnyOn() && (c.CertFile != "" || c.KeyFile != "") {
		errs = append(errs, errors.New("tls: cert_file or key_file is set but grpc, http, kafka and rsm are all off"))
	}
	if !mtls && c.ClientCAFile != "" {
		errs = append(errs, errors.New("tls: client_ca_file is set but no endpoint is mtls, so no client certificate would be checked"))
	}
	if (c.ClientCertFile == "") != (c.ClientKeyFile == "") {
		errs = append(errs, errors.New("tls: client_cert_file and client_key_file go together"))
	}
	return errors.Join(errs...)
}

// ValidateServe reports what the server (tierd run) needs beyond
// Validate: cert_file and key_file when an endpoint is tls or mtls, and
// client_ca_file when one is mtls; it reads no file.
func (c TLS) ValidateServe() error {
	var errs []error
	if c.AnyOn() && (c.CertFile == "" || c.KeyFile == "") {
		errs = append(errs, errors.New("tls: cert_file and key_file are required when grpc, http, kafka or rsm is tls or mtls"))
	}
	for _, m := range []string{c.GRPC, c.HTTP, c.Kafka, c.RSM} {
		if Mode(m) == TLSMTLS && c.ClientCAFile == "" {
			errs = append(errs, errors.New("tls: client_ca_file is required by an mtls endpoint (the CAs client certificates must chain to)"))
			break
		}
	}
	return errors.Join(errs...)
}
