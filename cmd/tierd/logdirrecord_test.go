package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/internal/instance"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/seglog"
)

// TestRestartOnAnEmptyMountPoint: a log dir tierd ran on that comes back
// without tierd's lock file (a disk not mounted before tierd started: an
// empty directory at its path) stops tierd run with a clear error,
// instead of tiering an empty dir whose partitions would all look remote
// only; the dir mounted back starts, and --new-log-dir accepts a dir new
// on purpose.
func TestRestartOnAnEmptyMountPoint(t *testing.T) {
	root := t.TempDir()
	logs := filepath.Join(root, "logs")
	l, err := seglog.Open(filepath.Join(logs, "orders-0"), seglog.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	l.Append(seglog.Record{Value: []byte("v")})
	l.Close()
	httpAddr := freeAddr(t)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), httpAddr)
	stop := startServe(t, cfgPath)
	testtools.WaitFor(t, "tierd serving", func() bool { return healthy(httpAddr) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.CheckRecordedLogDirs(cfg.Metadata.Dir, cfg.Copier.LogDirs, nil); err != nil {
		t.Fatalf("the same log dir again: %v", err)
	}

	// The disk is "unmounted": an empty directory stands at its path.
	mounted := filepath.Join(root, "logs.disk")
	if err := os.Rename(logs, mounted); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(logs, 0o755)
	code, _, errOut := runCmd("run", "--config", cfgPath)
	if code != 1 || !strings.Contains(errOut, "held tierd's "+instance.LockFile+" when tierd last ran and hold none now") ||
		!strings.Contains(errOut, "--new-log-dir "+logs) {
		t.Errorf("tierd run on the empty mount point: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(logs, instance.LockFile)); err == nil {
		t.Error("tierd run wrote its lock file into the empty mount point")
	}
	if err := daemon.CheckRecordedLogDirs(cfg.Metadata.Dir, cfg.Copier.LogDirs, []string{logs}); err != nil {
		t.Errorf("with --new-log-dir: %v", err)
	}
	// Mounted back, the dir holds the lock file again.
	os.Remove(logs)
	if err := os.Rename(mounted, logs); err != nil {
		t.Fatal(err)
	}
	if err := daemon.CheckRecordedLogDirs(cfg.Metadata.Dir, cfg.Copier.LogDirs, nil); err != nil {
		t.Errorf("the disk mounted back: %v", err)
	}
	// A log dir added to the config is new, not lost.
	if err := daemon.CheckRecordedLogDirs(cfg.Metadata.Dir, append(cfg.Copier.LogDirs, filepath.Join(root, "more")), nil); err != nil {
		t.Errorf("a log dir added to copier.log_dirs: %v", err)
	}
}
