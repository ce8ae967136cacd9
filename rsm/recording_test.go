package rsm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/memory"
	"github.com/tierd/tierd/rsm/rsmtest"
)

func put(t *testing.T, b rsm.Bucket, key, body string) {
	t.Helper()
	if err := b.Upload(context.Background(), key, strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatalf("upload %s: %v", key, err)
	}
}

// TestRecordingBucket: a tool claims its own prefix in a bucket that holds
// other writers' objects, including ones whose keys share the prefix's
// leading characters; afterwards those are all there byte for byte and
// the tool's own are gone.
func TestRecordingBucket(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (rsm.Bucket, string)
	}{
		{"memory", func(t *testing.T) (rsm.Bucket, string) { return memory.New(), "" }},
		{"filesystem", func(t *testing.T) (rsm.Bucket, string) {
			dir := t.TempDir()
			b, err := filesystem.New(filesystem.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			return b, dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b, dir := tc.open(t)
			others := map[string]string{
				"demo-0/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA.log": "another tierd's segment",
				"demo-0/_owner.json":        `{"brokerId":1}`,
				"tools/run-10/demo-0/x.log": "a run whose name extends ours",
				"tools/run-1.log":           "a key beside our prefix",
			}
			for k, v := range others {
				put(t, b, k, v)
			}
			r, err := rsm.ClaimPrefix(ctx, b, "tools/run-1")
			if err != nil {
				t.Fatal(err)
			}
			if r.Prefix() != "tools/run-1/" {
				t.Fatalf("Prefix() = %q", r.Prefix())
			}
			mine := []string{"tools/run-1/demo-0/00000000000000000000-BBBBBBBBBBBBBBBBBBBBBB.manifest.json",
				"tools/run-1/demo-0/00000000000000000000-BBBBBBBBBBBBBBBBBBBBBB.log", "tools/run-1/demo-0/_owner.json"}
			for _, k := range mine {
				put(t, r, k, "mine: "+k)
			}
			put(t, r, mine[2], "mine, renewed") // a second upload of one key is one key
			// Writes, deletes and aborts outside the claimed prefix are refused
			// and change nothing.
			if err := r.Upload(ctx, "demo-0/new.log", strings.NewReader("x"), 1); !errors.Is(err, rsm.ErrOutsidePrefix) {
				t.Errorf("upload outside: %v", err)
			}
			for k := range others {
				if err := r.Delete(ctx, k); !errors.Is(err, rsm.ErrOutsidePrefix) {
					t.Errorf("delete %s outside: %v", k, err)
				}
			}
			if err := r.AbortIncompleteUploads(ctx, "demo-0/"); !errors.Is(err, rsm.ErrOutsidePrefix) {
				t.Errorf("abort outside: %v", err)
			}
			if got := fmt.Sprint(r.Written()); got != fmt.Sprint([]string{mine[1], mine[0], mine[2]}) {
				t.Errorf("Written() = %s", got)
			}
			// A killed upload of the run's own leaves a temporary file in a
			// filesystem bucket: DeleteWritten aborts it.
			if dir != "" {
				p := filepath.Join(dir, "tools", "run-1", "demo-0", "x.log.123.tierd-upload")
				if err := os.WriteFile(p, []byte("part"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			n, err := r.DeleteWritten(ctx)
			if err != nil || n != 3 {
				t.Fatalf("DeleteWritten = %d, %v", n, err)
			}
			if d := rsmtest.Diff(others, rsmtest.Snapshot(t, b, "")); d != "" {
				t.Errorf("after DeleteWritten the bucket differs from the other writers' objects:\n%s", d)
			}
			if mb, ok := b.(rsm.MultipartBucket); ok {
				if ups, err := mb.IncompleteUploads(ctx, ""); err != nil || len(ups) != 0 {
					t.Errorf("incomplete uploads after DeleteWritten: %v %v", ups, err)
				}
			}

			// An object under the claimed prefix that did not come through
			// the recorder is reported and kept.
			r, err = rsm.ClaimPrefix(ctx, b, "tools/run-2")
			if err != nil {
				t.Fatal(err)
			}
			put(t, r, "tools/run-2/a", "mine")
			put(t, b, "tools/run-2/b", "a child process's")
			n, err = r.DeleteWritten(ctx)
			if n != 1 || !errors.Is(err, rsm.ErrLeftBehind) || !strings.Contains(err.Error(), "tools/run-2/b") {
				t.Errorf("DeleteWritten with a stranger = %d, %v", n, err)
			}
			if got := rsmtest.Snapshot(t, b, "")["tools/run-2/b"]; got != "a child process's" {
				t.Errorf("the object not written through the recorder holds %q", got)
			}
		})
	}
}

// TestClaimPrefixRefuses: a prefix holding an object or an incomplete
// upload is refused with ErrPrefixNotEmpty naming it, and a bad prefix is
// refused; nothing is changed.
func TestClaimPrefixRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := filesystem.New(filesystem.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	put(t, b, "run-a/demo-0/seg.log", "someone's")
	if _, err := rsm.ClaimPrefix(ctx, b, "run-a"); !errors.Is(err, rsm.ErrPrefixNotEmpty) || !strings.Contains(err.Error(), "run-a/demo-0/seg.log") {
		t.Errorf("claim of a prefix with an object: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "run-b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run-b", "seg.log.1.tierd-upload"), []byte("part"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rsm.ClaimPrefix(ctx, b, "run-b"); !errors.Is(err, rsm.ErrPrefixNotEmpty) || !strings.Contains(err.Error(), "incomplete upload") {
		t.Errorf("claim of a prefix with an incomplete upload: %v", err)
	}
	for _, p := range []string{"", "run-c/", "/run-c"} {
		if _, err := rsm.ClaimPrefix(ctx, b, p); err == nil {
			t.Errorf("claim of prefix %q succeeded", p)
		}
	}
	if got := rsmtest.Snapshot(t, b, ""); len(got) != 1 || got["run-a/demo-0/seg.log"] != "someone's" {
		t.Errorf("bucket after refused claims: %v", got)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "run-b", "seg.log.1.tierd-upload")); err != nil || !bytes.Equal(data, []byte("part")) {
		t.Errorf("incomplete upload after refused claim: %q %v", data, err)
	}
}
