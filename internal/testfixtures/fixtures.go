// Package testfixtures locates the real Kafka broker files that tests read
// from ../shared/fixtures/real (see its PROVENANCE.md). The files are never
// copied into this repository.
package testfixtures

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvVar overrides the fixture directory.
const EnvVar = "TIERD_FIXTURES"

// Dir returns the fixture directory: $TIERD_FIXTURES, or ../shared/fixtures/real
// relative to the repository root (the directory holding go.mod). When it
// is missing the test is skipped, or fails when $CI is set, because CI must
// never pass without the real data.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvVar)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatalf("find repository root: %v", err)
		}
		dir = filepath.Join(root, "..", "shared", "fixtures", "real")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if os.Getenv("CI") != "" {
			t.Fatalf("real fixtures not found at %s (set %s); CI requires them", dir, EnvVar)
		}
		t.Skipf("real fixtures not found at %s (set %s)", dir, EnvVar)
	}
	return dir
}

// Path joins elem onto Dir and fails the test when the file is missing.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{Dir(t)}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return p
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
