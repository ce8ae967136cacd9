package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/seglog"
)

// A partition moved between two configured log dirs (Kafka's
// alter-log-dirs, KIP-113), leaving its old directory renamed
// "<topic>-<p>.<uuid>-delete": every remote copy stays, fetches of the
// old offsets keep working over gRPC, tiering continues in the new log
// dir, and nothing is journaled.
func TestCaseMoveBetweenLogDirs(t *testing.T) {
	t.Parallel()
	w := newLocal(t)
	second := t.TempDir()
	l := w.open()
	for i := 0; i < 600; i++ {
		if _, err := l.Append(seglog.Record{Value: bytes.Repeat([]byte{byte(i)}, 5000)}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	c := w.copier(func(cfg *copier.Config) { cfg.LogDirs = append(cfg.LogDirs, second) })
	ctx := context.Background()
	if n, err := c.Sync(ctx); err != nil || n != 2 {
		t.Fatalf("first sync: %d copies, %v", n, err)
	}
	before, _ := w.store.FinishedSegments(w.tp)
	// The move: the broker copies the log into "-future" in the new log
	// dir, then renames the old directory "-delete" and the new one live.
	moved := filepath.Join(second, "t-0")
	if err := os.CopyFS(moved, os.DirFS(w.dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(w.dir, w.dir+".0f1e2d3c4b5a69788796a5b4c3d2e1f0-delete"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := w.store.FinishedSegments(w.tp)
	if len(after) != len(before) {
		t.Fatalf("copies %d before the move, %d after", len(before), len(after))
	}
	for i := range before {
		if after[i].ID != before[i].ID {
			t.Fatalf("copy %d changed: %s -> %s", i, before[i].ID, after[i].ID)
		}
	}
	for _, off := range []int64{0, 205, 206, 300, 411} {
		resp, err := w.api.Fetch(ctx, &tierdpb.FetchRequest{Topic: "t", Partition: 0, Offset: off, MaxBytes: 1})
		if err != nil || !bytes.Contains(resp.Records, bytes.Repeat([]byte{byte(off)}, 100)) {
			t.Fatalf("fetch %d after the move: %v", off, err)
		}
	}
	// The partition rolls on in its new log dir and keeps tiering there.
	w.dir = moved
	l = w.open()
	for i := 600; i < 900; i++ {
		if _, err := l.Append(seglog.Record{Value: bytes.Repeat([]byte{byte(i)}, 5000)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := c.Sync(ctx); err != nil || n != 2 {
		t.Fatalf("sync in the new log dir: %d copies, %v; want the 2 segments rolled there", n, err)
	}
	if j, _ := w.store.Journal(0, 0); len(j) != 0 {
		t.Fatalf("journal %+v", j)
	}
	if ds, _ := w.store.Deletions(nil); len(ds) != 0 {
		t.Fatalf("deletions %+v", ds)
	}
}
