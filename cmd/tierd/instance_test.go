package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/internal/instance"
)

// A second tierd on the same log dir (with its own metadata dir) refuses
// to start, naming the dir and the holder. The instance id stays the same
// across a restart, "tierd rlmm rebuild", and the loss of the metadata dir.
func TestOneTierdPerLogDir(t *testing.T) {
	root := t.TempDir()
	logs := filepath.Join(root, "logs")
	os.MkdirAll(logs, 0o755)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), "")
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	stop := startServe(t, cfgPath)
	var id string
	for i := 0; id == ""; i++ {
		if i == 1000 {
			t.Fatal("the first tierd did not record itself in the lock file")
		}
		time.Sleep(10 * time.Millisecond)
		id = instance.Recorded([]string{logs})
	}
	second := cfg
	second.Metadata.Dir, second.Fetch.Listen = filepath.Join(root, "metadata-2"), freeAddr(t)
	err = serve(context.Background(), second, slog.New(slog.DiscardHandler))
	if !errors.Is(err, instance.ErrLocked) {
		t.Fatalf("second tierd on the same log dir: %v", err)
	}
	for _, want := range []string{logs, id} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("first tierd: %v", err)
	}
	if got, _ := instance.Read(cfg.Metadata.Dir); got != id {
		t.Fatalf("instance id in the metadata dir %q, lock file %q", got, id)
	}
	if code, out, errOut := runCmd("rlmm", "rebuild", "--config", cfgPath); code != 0 {
		t.Fatalf("rlmm rebuild: %d\n%s\n%s", code, out, errOut)
	}
	if got, _ := instance.Read(cfg.Metadata.Dir); got != id {
		t.Fatalf("instance id after rlmm rebuild %q, want %q", got, id)
	}
	os.RemoveAll(cfg.Metadata.Dir) // lost: the lock file still names this tierd
	d, err := daemon.OpenParts(context.Background(), cfg, daemon.PartsOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.InstanceID != id {
		t.Fatalf("instance id after the metadata dir was lost %q, want %q", d.InstanceID, id)
	}
}
