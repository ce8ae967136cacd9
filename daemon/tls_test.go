package daemon

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/tierd/tierd/config"
)

// TestRunNeedsServerCertificate: tierd run refuses a TLS endpoint without
// cert_file and key_file, and an mtls one without client_ca_file, which
// a tool's config (loaded by the same rules) does not need.
func TestRunNeedsServerCertificate(t *testing.T) {
	for c, want := range map[config.TLS]string{
		{HTTP: "tls", CAFile: "ca"}:                             "cert_file and key_file are required",
		{GRPC: "mtls", CertFile: "c", KeyFile: "k"}:             "client_ca_file is required",
		{Kafka: "tls", ClientCertFile: "c", ClientKeyFile: "k"}: "cert_file and key_file are required",
	} {
		if _, err := tlsHolder(c, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", c, err, want)
		}
	}
}
