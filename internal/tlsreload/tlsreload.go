// Package tlsreload serves TLS from PEM files that can be replaced while
// the process runs: a Holder loads a certificate, its key and, for mutual
// TLS, the certificate authorities that client certificates must chain to,
// and hands out tls.Configs that ask it for the current ones at every
// handshake. Reload reads the files again; connections made afterwards use
// the new ones, open connections keep theirs. A failed reload keeps the
// previous material, so a half-written certificate never takes a listener
// down.
//
// Files are PEM as OpenSSL, Kafka (ssl.keystore.type=PEM) and Go's
// crypto/tls read them: a certificate chain (leaf first) in the cert file,
// a PKCS#1, PKCS#8 or SEC 1 private key in the key file, and one or more
// CA certificates in the client CA file.
package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// ErrNoCertificates is returned (wrapped) for a CA file that holds no PEM
// certificate.
var ErrNoCertificates = errors.New("tlsreload: no PEM certificate in file")

// Files names the PEM files of a server's TLS material.
type Files struct {
	// CertFile is the certificate chain, leaf first. Required.
	CertFile string
	// KeyFile is the certificate's private key. Required.
	KeyFile string
	// ClientCAFile holds the CA certificates client certificates must
	// chain to. Empty: client certificates are neither asked for nor
	// checked, whatever a ServerConfig asks.
	ClientCAFile string
}

// material is one load of the files.
type material struct {
	cert      tls.Certificate
	clientCAs *x509.CertPool // nil without ClientCAFile
	loadedAt  time.Time
}

// Holder holds the current TLS material. It is safe for concurrent use.
type Holder struct {
	files Files
	cur   atomic.Pointer[material]
}

// New loads the files. Errors name the file that could not be used.
func New(f Files) (*Holder, error) {
	h := &Holder{files: f}
	if err := h.Reload(); err != nil {
		return nil, err
	}
	return h, nil
}

// Files returns the files the holder reads.
func (h *Holder) Files() Files { return h.files }

// Reload reads the files again and, when all of them are usable, makes them
// the ones new handshakes use. On error the previous material stays.
func (h *Holder) Reload() error {
	m, err := load(h.files)
	if err != nil {
		return err
	}
	h.cur.Store(m)
	return nil
}

func load(f Files) (*material, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("tlsreload: cert_file and key_file are both required")
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsreload: certificate %s with key %s: %w", f.CertFile, f.KeyFile, err)
	}
	m := &material{cert: cert, loadedAt: time.Now()}
	if f.ClientCAFile != "" {
		if m.clientCAs, err = LoadPool(f.ClientCAFile); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// LoadPool reads a PEM file of CA certificates into a pool. Errors:
// ErrNoCertificates (wrapped) for a file without one, I/O errors.
func LoadPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tlsreload: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%w %s", ErrNoCertificates, path)
	}
	return pool, nil
}

// Leaf returns the current certificate's leaf, for logging its subject and
// expiry.
func (h *Holder) Leaf() *x509.Certificate { return h.cur.Load().cert.Leaf }

// ServerConfig returns a server config that takes the holder's current
// material at every handshake. With requireClientCert (and a client CA
// file) a client must present a certificate that chains to the client
// CAs, or the handshake fails (mutual TLS, Kafka's
// ssl.client.auth=required); without, no client certificate is asked for.
// The minimum version is TLS 1.2.
func (h *Holder) ServerConfig(requireClientCert bool) *tls.Config {
	outer := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := h.cur.Load()
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{m.cert}}
			if requireClientCert {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = m.clientCAs
				if c.ClientCAs == nil {
					c.ClientCAs = x509.NewCertPool() // nothing is trusted: every client is refused
				}
			}
			return c, nil
		},
	}
	if requireClientCert {
		// Says the mode to those who look (each handshake uses the
		// config above).
		outer.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return outer
}

// ClientFiles names the PEM files a client uses to reach a TLS server.
type ClientFiles struct {
	// CAFile holds the CA certificates the server's certificate must
	// chain to. Empty: the system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate and its key, for a
	// server that requires one (mutual TLS); both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must hold. Empty:
	// the host of the address dialled.
	ServerName string
}

// ClientConfig builds a client config from files. Errors name the file
// that could not be used.
func ClientConfig(f ClientFiles) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pool, err := LoadPool(f.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("tlsreload: a client certificate needs both its cert file and its key file")
	}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tlsreload: client certificate %s with key %s: %w", f.CertFile, f.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
