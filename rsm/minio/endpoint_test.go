package minio

import (
	"strings"
	"testing"
)

// TestEndpointForms: a URL says plain or TLS by its scheme; the old
// host:port form goes by Insecure; anything else is refused with the
// syntax to use.
func TestEndpointForms(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		insecure bool
		host     string
		secure   bool
		err      string
	}{
		{"http://127.0.0.1:9000", false, "127.0.0.1:9000", false, ""},
		{"https://minio.example:9000/", false, "minio.example:9000", true, ""},
		{"https://s3.example", false, "s3.example", true, ""},
		{"127.0.0.1:9000", true, "127.0.0.1:9000", false, ""},
		{"127.0.0.1:9000", false, "127.0.0.1:9000", true, ""},
		{"https://127.0.0.1:9000", true, "", false, "https and Insecure"},
		{"ftp://127.0.0.1:9000", false, "", false, "want http:// or https://"},
		{"http://127.0.0.1:9000/bucket", false, "", false, "no path"},
		{"127.0.0.1", false, "", false, "want a URL such as http://127.0.0.1:9000"},
		{"", false, "", false, "want a URL"},
	} {
		host, secure, err := Config{Endpoint: tc.endpoint, Insecure: tc.insecure}.target()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.endpoint, err, tc.err)
			}
			continue
		}
		if err != nil || host != tc.host || secure != tc.secure {
			t.Errorf("%q insecure=%t: %q secure=%t err=%v; want %q secure=%t", tc.endpoint, tc.insecure, host, secure, err, tc.host, tc.secure)
		}
	}
}
