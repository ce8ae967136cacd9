package testtools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A skip is appended to the file $TIERD_SKIP_REPORT names, one line
// saying why and what to install, and the test is skipped.
func TestSkipReports(t *testing.T) {
	report := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipReportEnv, report)
	ran := false
	t.Run("missing", func(t *testing.T) {
		Skip(t, "tests that need frob: it is not on PATH", "the Debian package frob")
		ran = true
	})
	if ran {
		t.Fatal("Skip did not stop the test")
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if want := "skipped: tests that need frob: it is not on PATH (install the Debian package frob)\n"; string(data) != want {
		t.Fatalf("report %q, want %q", data, want)
	}
	if !strings.HasPrefix(string(data), "skipped: ") {
		t.Fatal("no skipped: prefix")
	}
}
