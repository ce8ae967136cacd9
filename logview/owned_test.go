package logview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/listener"
)

// TestViewBrokerOwned: in a broker-owned log dir, local data is served
// only below the high watermark of replication-offset-checkpoint; a
// partition the checkpoint does not list serves nothing local; a new
// checkpoint is picked up.
func TestViewBrokerOwned(t *testing.T) {
	r := newRig(t)
	w, _, _ := writeTxnLog(t, filepath.Join(r.logDir, "t-0"))
	cfg := DefaultConfig()
	cfg.LogDirs, cfg.BrokerOwned, cfg.RescanInterval = []string{r.logDir}, true, 1
	v, err := New(cfg, r.srv)
	if err != nil {
		t.Fatal(err)
	}
	tp := listener.TopicPartition{Topic: "t", Partition: 0}
	ctx := context.Background()
	ckpt := filepath.Join(r.logDir, "replication-offset-checkpoint")
	// No checkpoint yet: nothing replicated, nothing served.
	o, err := v.Offsets(ctx, tp)
	if err != nil || o.HighWatermark != 0 {
		t.Fatalf("offsets without a checkpoint: %+v %v", o, err)
	}
	if _, err := v.Read(ctx, tp, 1, 1<<20, listener.ReadUncommitted); !errors.As(err, new(*listener.OffsetOutOfRangeError)) {
		t.Fatalf("read past a high watermark of 0: %v", err)
	}
	hw := w.firsts[57] // a batch boundary inside the log
	writeCheckpoint(t, ckpt, fmt.Sprintf("0\n2\nt 0 %d\nother 3 9\n", hw))
	o, err = v.Offsets(ctx, tp)
	if err != nil || o.HighWatermark != hw || o.LastStableOffset > hw {
		t.Fatalf("offsets: %+v %v, want high watermark %d", o, err, hw)
	}
	got, _ := readAll(t, v, tp, 0, listener.ReadUncommitted)
	if want := bytes.Join(w.batches[:57], nil); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes below the high watermark, want %d", len(got), len(want))
	}
	writeCheckpoint(t, ckpt, "0\n1\nt 0 402\n")
	if got, _ := readAll(t, v, tp, 0, listener.ReadUncommitted); !bytes.Equal(got, w.from(0)) {
		t.Fatalf("after the checkpoint moved: %d bytes, want %d", len(got), len(w.from(0)))
	}
}

// writeCheckpoint replaces a checkpoint file atomically, as a broker does.
func writeCheckpoint(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
