package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/listener/sasl"
)

// A file of tokens or credentials owned by another user is that user's
// to edit whatever its mode: a line they add is a login. tierd refuses
// one owned by neither its own user nor root.
func TestSecretFilesOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte(grpcapi.TokenLine("User:ops", "planted-token")+"\n"), 0o644)
	creds := filepath.Join(dir, "creds")
	cred, err := sasl.NewCredential(sasl.ScramSHA256, "pw", 4096)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(creds, []byte(sasl.FormatLine("mallory", sasl.ScramSHA256, cred)+"\n"), 0o600)
	for _, p := range []string{tokens, creds} {
		if err := os.Chown(p, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newAPITokens(tokens, "fetch: tokens_file"); err == nil || !strings.Contains(err.Error(), "uid 4242") {
		t.Errorf("a tokens file of uid 4242: %v", err)
	}
	if _, err := readCredentials(creds); err == nil || !strings.Contains(err.Error(), "uid 4242") {
		t.Errorf("a credentials file of uid 4242: %v", err)
	}
}

// TestCredentialsFileMode: a credentials file that another user may read
// or write is refused (one who can write it can add a login of their
// own); one only its owner and group read loads.
func TestCredentialsFileMode(t *testing.T) {
	c, err := sasl.NewCredential(sasl.ScramSHA256, "alice-pw", 4096)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "creds")
	if err := os.WriteFile(p, []byte(sasl.FormatLine("alice", sasl.ScramSHA256, c)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for mode, ok := range map[os.FileMode]bool{0o600: true, 0o640: true, 0o400: true,
		0o604: false, 0o602: false, 0o620: false, 0o660: false, 0o666: false, 0o601: false} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		creds, err := readCredentials(p)
		switch {
		case ok && (err != nil || creds.Len() != 1):
			t.Errorf("mode %04o: %v", mode, err)
		case !ok && err == nil:
			t.Errorf("mode %04o: loaded", mode)
		case !ok && !strings.Contains(err.Error(), "chmod"):
			t.Errorf("mode %04o: %v (no remedy named)", mode, err)
		}
	}
}
