package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/rlmm"
)

// lockWaitFS is the real filesystem, except that taking Pebble's directory
// lock waits until release is closed: an open that hangs on a slow disk.
type lockWaitFS struct {
	vfs.FS
	locking chan struct{}
	release chan struct{}
}

func (f *lockWaitFS) Lock(name string) (io.Closer, error) {
	close(f.locking)
	<-f.release
	return f.FS.Lock(name)
}

// A stop (SIGTERM, SIGINT) while the metadata store opens ends "tierd
// run" with exit code 0 and an INFO line saying so, not an ERROR and 1.
func TestStopWhileOpeningStore(t *testing.T) {
	cfg := config.Default()
	cfg.Metadata.Dir = filepath.Join(t.TempDir(), "meta")
	fs := &lockWaitFS{FS: vfs.Default, locking: make(chan struct{}), release: make(chan struct{})}
	defer close(fs.release)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-fs.locking; cancel() }()
	_, err := daemon.OpenStore(ctx, cfg, rlmm.WithFS(fs))
	var se *daemon.StopError
	if !errors.As(err, &se) || se.Dir != cfg.Metadata.Dir {
		t.Fatalf("openStore stopped: %v, want a stopError for %s", err, cfg.Metadata.Dir)
	}
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	if code := stopped(ctx, log, err); code != 0 {
		t.Fatalf("exit code %d after a requested stop", code)
	}
	if s := out.String(); !strings.Contains(s, "level=INFO") || !strings.Contains(s, "stopped while opening the metadata store") || strings.Contains(s, "ERROR") {
		t.Fatalf("log %q", s)
	}
	// The same error without a stop requested is a failure.
	out.Reset()
	if code := stopped(context.Background(), log, errors.New("rlmm: open /m: permission denied")); code != 1 || !strings.Contains(out.String(), "level=ERROR") {
		t.Fatalf("a failure: exit %d, log %q", code, out.String())
	}
	out.Reset()
	if code := stopped(context.Background(), log, nil); code != 0 || !strings.Contains(out.String(), "level=INFO msg=\"tierd stopped\"") {
		t.Fatalf("a clean stop: exit %d, log %q", code, out.String())
	}
}
