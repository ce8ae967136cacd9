package privfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file of rights is believed only when nobody but its owner may write
// it and its owner is this process's user or root.
func TestCheck(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func() error {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return Check("test: file", p, st)
	}
	if err := check(); err != nil {
		t.Fatalf("0644, ours: %v", err)
	}
	for _, m := range []os.FileMode{0o664, 0o646, 0o666} {
		os.Chmod(p, m)
		if err := check(); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
			t.Errorf("mode %v: %v", m, err)
		}
	}
	os.Chmod(p, 0o600)
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := check(); err == nil || !strings.Contains(err.Error(), "uid 4242") {
		t.Errorf("a file of uid 4242: %v", err)
	}
}
