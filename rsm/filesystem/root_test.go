package filesystem

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm"
)

// TestRootGoneIsUnreachable: while the bucket's root directory is moved
// away, or replaced by a new empty directory of the same name (an
// unmounted mount point), Check fails, and every request fails with
// ErrRootUnavailable (and rsm.ErrUnreachable), never rsm.ErrNotFound;
// an upload does not recreate the root. When the original directory
// returns, Check passes and the objects read again.
func TestRootGoneIsUnreachable(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "bucket")
	b, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(ctx, "t-0/a.log", bytes.NewReader([]byte("abc")), 3); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(ctx, ""); err != nil {
		t.Fatalf("Check with the root in place: %v", err)
	}
	requests := func(t *testing.T) {
		t.Helper()
		_, aerr := b.Attributes(ctx, "t-0/a.log")
		_, gerr := b.GetRange(ctx, "t-0/a.log", 0, -1)
		_, merr := b.Attributes(ctx, "t-0/never")
		ierr := b.Iter(ctx, "t-0/", func(string) error { return nil })
		derr := b.Delete(ctx, "t-0/a.log")
		_, _, rerr := b.ReadVersioned(ctx, "t-0/lease")
		_, perr := b.PutIfAbsent(ctx, "t-0/lease", []byte("x"))
		uerr := b.Upload(ctx, "t-0/b.log", bytes.NewReader([]byte("b")), 1)
		for name, err := range map[string]error{"Check": b.Check(ctx, ""), "Attributes": aerr, "Attributes of a missing key": merr,
			"GetRange": gerr, "Iter": ierr, "Delete": derr, "ReadVersioned": rerr, "PutIfAbsent": perr, "Upload": uerr} {
			if !errors.Is(err, ErrRootUnavailable) || !errors.Is(err, rsm.ErrUnreachable) || errors.Is(err, rsm.ErrNotFound) {
				t.Errorf("%s with the root unavailable: %v, want ErrRootUnavailable and not ErrNotFound", name, err)
			}
		}
	}
	away := filepath.Join(parent, "bucket.away")
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	t.Run("moved away", func(t *testing.T) {
		requests(t)
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the root was recreated: stat %v", err)
		}
		if err := b.Check(ctx, ""); err == nil || !strings.Contains(err.Error(), "is missing") {
			t.Errorf("Check = %v, want it to say the directory is missing", err)
		}
	})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("replaced by an empty directory", func(t *testing.T) {
		requests(t)
		if err := b.Check(ctx, ""); err == nil || !strings.Contains(err.Error(), "not the directory tierd opened") {
			t.Errorf("Check = %v, want it to say the directory is another", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("the replacement directory was written to: %v", ents)
		}
	})
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(ctx, ""); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Check with a file in place of the root = %v, want 'not a directory'", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(ctx, ""); err != nil {
		t.Fatalf("Check after the root returned: %v", err)
	}
	if a, err := b.Attributes(ctx, "t-0/a.log"); err != nil || a.Size != 3 {
		t.Errorf("Attributes after the root returned = %v, %v", a, err)
	}
	if _, err := b.Attributes(ctx, "t-0/never"); !errors.Is(err, rsm.ErrNotFound) {
		t.Errorf("Attributes of a missing key with the root in place = %v, want ErrNotFound", err)
	}
}

// TestOpenRefusesMissingDir: Open never creates the directory, and says
// how to create it; CreateBucket creates it once, then reports it exists.
func TestOpenRefusesMissingDir(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "mnt", "bucket")
	_, err := Open(Config{Dir: dir})
	if !errors.Is(err, rsm.ErrMisconfigured) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "tierd bucket create") {
		t.Fatalf("Open of a missing dir = %v, want a BucketError naming it and tierd bucket create", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open created the directory: %v", err)
	}
	b, err := Unopened(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		created, err := b.CreateBucket(ctx)
		if err != nil || created != want {
			t.Fatalf("CreateBucket #%d = %v, %v, want %v", i+1, created, err, want)
		}
	}
	if _, err := Open(Config{Dir: dir}); err != nil {
		t.Fatalf("Open after CreateBucket: %v", err)
	}
}
