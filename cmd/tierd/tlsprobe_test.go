package main

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPlainTalksToTLS: a TLS server (asking for a client certificate or
// not) is told from a plaintext one and from an address nothing listens
// on; for a tool with tls.grpc off, plainToTLS names the settings to add
// only for the TLS ones.
func TestPlainTalksToTLS(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	tlsSrv, plainSrv := httptest.NewTLSServer(ok), httptest.NewServer(ok)
	defer tlsSrv.Close()
	defer plainSrv.Close()
	mtls := httptest.NewUnstartedServer(ok)
	mtls.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	mtls.StartTLS()
	defer mtls.Close()
	for name, tc := range map[string]struct {
		addr string
		want bool
	}{
		"tls":       {tlsSrv.Listener.Addr().String(), true},
		"mtls":      {mtls.Listener.Addr().String(), true},
		"plaintext": {plainSrv.Listener.Addr().String(), false},
		"nothing":   {freeAddr(t), false},
	} {
		if got := plainTalksToTLS(tc.addr); got != tc.want {
			t.Errorf("%s: plainTalksToTLS = %v, want %v", name, got, tc.want)
		}
		err := plainToTLS("", tc.addr)
		if tc.want != (err != nil) || err != nil && !strings.Contains(err.Error(), "grpc: tls") {
			t.Errorf("%s: plainToTLS = %v", name, err)
		}
		if err := plainToTLS("tls", tc.addr); err != nil {
			t.Errorf("%s: a tool speaking TLS: plainToTLS = %v", name, err)
		}
	}
}
