// Package testtools finds the command-line tools tierd's tests run against
// tierd, as an operator would: grpcurl. scripts/install-tools.sh (make
// tools) installs them, pinned, in ~/.cache/tierd-bin.
package testtools

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Grpcurl returns the path of grpcurl: $TIERD_GRPCURL, else
// ~/.cache/tierd-bin/grpcurl, else the one on PATH. Without one the test
// is skipped, or fails when $CI is set (CI installs it).
func Grpcurl(t testing.TB) string {
	t.Helper()
	cands := []string{os.Getenv("TIERD_GRPCURL")}
	if home, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(home, ".cache", "tierd-bin", "grpcurl"))
	}
	if p, err := exec.LookPath("grpcurl"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range cands {
		if st, err := os.Stat(c); c != "" && err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return c
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("grpcurl not found: run scripts/install-tools.sh (make tools)")
	}
	t.Skip("grpcurl not found (make tools installs it in ~/.cache/tierd-bin)")
	return ""
}

// Run runs a tool with args for at most 60 s and returns its stdout,
// stderr and exit error.
func Run(path string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}
