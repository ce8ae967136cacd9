package copier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
)

// tieredTwoOnDir returns a rig over a filesystem bucket at root (so that
// tests can move or change its objects behind its back), with
// copy_checks_per_pass checks, after two segments are tiered, and their
// finished copies.
func tieredTwoOnDir(t *testing.T, checks int) (root string, r *rig, fin []remotelog.SegmentMetadata) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "bucket")
	b, err := filesystem.New(filesystem.Config{Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.CopyChecksPerPass = checks
	r = newRig(t, cfg, b)
	tieredTwo(t, r, idA)
	if fin, err = r.store.FinishedSegments(r.tp); err != nil || len(fin) != 2 {
		t.Fatalf("finished copies %d, %v; want 2", len(fin), err)
	}
	return root, r, fin
}

// damagedRows returns the rows of r's partition marked damaged.
func damagedRows(t *testing.T, r *rig) []remotelog.SegmentMetadata {
	t.Helper()
	rows, err := r.store.Segments(r.tp)
	if err != nil {
		t.Fatal(err)
	}
	var out []remotelog.SegmentMetadata
	for _, row := range rows {
		if row.Damaged != "" {
			out = append(out, row)
		}
	}
	return out
}

// A filesystem bucket whose root directory is moved away (or unmounted)
// is the store being down, not every object missing: passes fail, reads
// and checks of every copy (reported by readers and sampled) mark
// nothing damaged, and once the directory is back the next pass succeeds
// with no mark.
func TestBucketRootGoneMarksNothing(t *testing.T) {
	root, r, fin := tieredTwoOnDir(t, 4)
	if err := os.Rename(root, root+".away"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		for _, f := range fin {
			r.c.SuspectCopy(f)
		}
		if _, err := r.c.Sync(ctx); err == nil {
			t.Errorf("pass %d with the bucket's root gone succeeded", i)
		}
		for _, f := range fin {
			if err := r.c.audit.checkCopy(ctx, f); !errors.Is(err, rsm.ErrUnreachable) {
				t.Errorf("check of %s with the root gone: %v, want rsm.ErrUnreachable", f.ID, err)
			}
		}
	}
	if d := damagedRows(t, r); len(d) != 0 {
		t.Fatalf("copies marked damaged while the bucket's root was gone: %+v", d)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the bucket's root was recreated: %v", err)
	}
	if err := os.Rename(root+".away", root); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if d := damagedRows(t, r); len(d) != 0 {
		t.Fatalf("copies marked damaged after the root returned: %+v", d)
	}
}

// checkedBucket is a bucket whose store check fails while err is set.
type checkedBucket struct {
	rsm.Bucket
	err error
}

func (b *checkedBucket) Check(context.Context, string) error { return b.err }

// A copy with an object missing is not marked damaged while a fresh
// check of the store fails; it is once the check passes.
func TestNoDamageWhileStoreCheckFails(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CopyChecksPerPass = 0
	b := &checkedBucket{}
	r := newRig(t, cfg, nil)
	b.Bucket = r.bucket
	var err error
	if r.mgr, err = rsm.NewManager(b, rsm.Config{Prefix: "tierd"}); err != nil {
		t.Fatal(err)
	}
	r.c.rs, r.c.audit.rs = r.mgr, r.mgr
	tieredTwo(t, r, idA)
	fin, _ := r.store.FinishedSegments(r.tp)
	ctx := context.Background()
	if err := r.bucket.Delete(ctx, r.mgr.Key(fin[0], ".log")); err != nil {
		t.Fatal(err)
	}
	b.err = errors.New("the store does not answer")
	if err := r.c.audit.checkCopy(ctx, fin[0]); err == nil || !strings.Contains(err.Error(), "not marking") {
		t.Fatalf("check with the store check failing: %v, want a refusal to mark", err)
	}
	if d := damagedRows(t, r); len(d) != 0 {
		t.Fatalf("marked while the store check failed: %+v", d)
	}
	b.err = nil
	if err := r.c.audit.checkCopy(ctx, fin[0]); err != nil {
		t.Fatal(err)
	}
	if d := damagedRows(t, r); len(d) != 1 || !strings.HasPrefix(d[0].Damaged, damagedMissing) {
		t.Fatalf("damaged rows %+v, want the copy marked for its missing .log", d)
	}
}

// A copy marked damaged for a missing object is cleared by a later check
// that finds the object back with its checksum; one whose object comes
// back with other bytes stays damaged, now for a checksum mismatch, and a
// further check leaves it so.
func TestDamageClearedWhenObjectReturns(t *testing.T) {
	root, r, fin := tieredTwoOnDir(t, 0)
	ctx := context.Background()
	file := func(m remotelog.SegmentMetadata) string {
		return filepath.Join(root, filepath.FromSlash(r.mgr.Key(m, ".log")))
	}
	for _, m := range fin {
		if err := os.Rename(file(m), file(m)+".aside"); err != nil {
			t.Fatal(err)
		}
		if err := r.c.audit.checkCopy(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if d := damagedRows(t, r); len(d) != 2 {
		t.Fatalf("damaged rows %+v, want both copies", d)
	}
	// The first comes back as it was, the second with other bytes.
	if err := os.Rename(file(fin[0])+".aside", file(fin[0])); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file(fin[1]) + ".aside")
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(file(fin[1]), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		for _, m := range fin {
			if err := r.c.audit.checkCopy(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := r.store.Segment(r.tp, fin[0].StartOffset, fin[0].ID); got.Damaged != "" {
			t.Fatalf("round %d: the copy back whole is still damaged: %q", round, got.Damaged)
		}
		if got, _ := r.store.Segment(r.tp, fin[1].StartOffset, fin[1].ID); !strings.HasPrefix(got.Damaged, damagedChecksum) {
			t.Fatalf("round %d: the copy back with other bytes: damaged %q, want a checksum mismatch", round, got.Damaged)
		}
	}
}

// A copy whose .log a reader found cut short (reported through
// SuspectCopy, as the fetch server does on a truncated object) is marked
// damaged at the next pass, naming the bytes it holds; restored whole, it
// is cleared.
func TestTruncatedLogMarksCopyDamaged(t *testing.T) {
	root, r, fin := tieredTwoOnDir(t, 0)
	m := fin[0]
	file := filepath.Join(root, filepath.FromSlash(r.mgr.Key(m, ".log")))
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	r.c.SuspectCopy(m)
	r.sync()
	got, _ := r.store.Segment(r.tp, m.StartOffset, m.ID)
	want := fmt.Sprintf("%s.log (holds %d of its %d bytes)", damagedMissing, len(data)/2, m.SizeInBytes)
	if got.Damaged != want {
		t.Fatalf("damaged %q, want %q", got.Damaged, want)
	}
	if d := damagedRows(t, r); len(d) != 1 {
		t.Fatalf("damaged rows %+v, want only the truncated copy", d)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.c.audit.checkCopy(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.store.Segment(r.tp, m.StartOffset, m.ID); got.Damaged != "" {
		t.Fatalf("the copy restored whole is still damaged: %q", got.Damaged)
	}
}
