package copier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// TestRetentionAbortsUploadsOncePerPartition: on the filesystem bucket, a
// retention pass that deletes two copies deletes their objects by key
// (seven each), lists the partition's incomplete uploads once (not once
// per copy), and removes the leftovers of interrupted uploads of exactly
// those two copies: that of a segment id no row names stays.
func TestRetentionAbortsUploadsOncePerPartition(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.RetentionMs = ptr(int64(150 * time.Minute / time.Millisecond))
	cfg.Retention.LocalRetentionMs = ptr(int64(150 * time.Minute / time.Millisecond))
	dir := t.TempDir()
	fs, err := filesystem.New(filesystem.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cb := rsmtest.Count(fs)
	r := newRig(t, cfg, cb)
	fiveSegments(t, r) // ages 5h, 4h, 3h, 2h, 1h: the first pass deletes three copies
	r.sync()
	fin, err := r.store.FinishedSegments(r.tp)
	if err != nil || len(fin) != 2 || fin[0].StartOffset != 30 || fin[1].StartOffset != 40 {
		t.Fatalf("finished copies after the first pass: %v, %v", fin, err)
	}
	// Leftovers of interrupted uploads, as a crash mid-Upload leaves them:
	// two of the copy at 30, one of the copy at 40, one of a segment id no
	// row names.
	leave := func(name string) string {
		p := filepath.Join(dir, filepath.FromSlash(name)) + ".4242.tierd-upload"
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stray := remotelog.SegmentMetadata{TopicPartition: r.tp, ID: remotelog.NewSegmentID(), StartOffset: 50}
	gone := []string{leave(r.mgr.Key(fin[0], ".log")), leave(r.mgr.Key(fin[0], ".index")), leave(r.mgr.Key(fin[1], ".log"))}
	kept := leave(r.mgr.Key(stray, ".log"))

	r.now = r.now.Add(2 * time.Hour) // the copies at 30 and 40 are 4h and 3h old
	cb.Reset()
	r.sync()
	if st := r.states(); st[remotelog.CopySegmentFinished] != 0 || st[remotelog.DeleteSegmentFinished] < 2 {
		t.Fatalf("states %v, want every copy deleted", st)
	}
	calls := cb.Calls()
	if calls["Delete"] != 14 || calls["IncompleteUploads"] != 1 || calls["AbortIncompleteUploads"] != 2 {
		t.Errorf("a pass deleting two copies with leftovers: %s; want 7 deletes a copy, one listing of the partition's uploads, one abort a copy", cb)
	}
	for _, p := range gone {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("leftover of a deleted copy still there: %s (%v)", strings.TrimPrefix(p, dir), err)
		}
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("leftover of a segment id no row names was removed: %s (%v)", strings.TrimPrefix(kept, dir), err)
	}
}
