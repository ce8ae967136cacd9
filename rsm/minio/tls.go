package minio

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"

	miniogo "github.com/minio/minio-go/v7"
)

// caTransport returns minio-go's default HTTPS transport trusting only the
// PEM certificates of path. Errors: an unreadable file, or one with no PEM
// certificate that parses.
func caTransport(path string) (http.RoundTripper, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("minio: ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("minio: ca_file %s holds no PEM certificate", path)
	}
	tr, err := miniogo.DefaultTransport(true)
	if err != nil {
		return nil, fmt.Errorf("minio: transport: %w", err)
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.TLSClientConfig.RootCAs = pool
	return tr, nil
}
