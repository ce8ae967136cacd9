package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/fetch"
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
	os.WriteFile(tokens, []byte(fetch.TokenLine("User:ops", "planted-token")+"\n"), 0o644)
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
	if _, err := newAPITokens(tokens); err == nil || !strings.Contains(err.Error(), "uid 4242") {
		t.Errorf("a tokens file of uid 4242: %v", err)
	}
	if _, err := readCredentials(creds); err == nil || !strings.Contains(err.Error(), "uid 4242") {
		t.Errorf("a credentials file of uid 4242: %v", err)
	}
}
