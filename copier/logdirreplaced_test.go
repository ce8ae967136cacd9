package copier

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// TestLogDirReplaced: a log dir is replaced, while tierd runs, by what
// root cannot list either (the mode 0 case of TestLogDirUnreadable does
// not stop root): a regular file, a symlink loop, a dangling symlink.
// Retention is lowered so that every copy is past it. Each time the pass
// fails naming the dir, tierd is not ready, the partition of that dir is
// held with its copies kept, and an operator's deletion is refused; put
// back, it is tiered again.
func TestLogDirReplaced(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		put        func(t *testing.T, dir string)
	}{
		{"regular file", "not a directory", func(t *testing.T, dir string) { writeFile(t, dir, "not a log dir\n") }},
		{"symlink loop", "too many levels of symbolic links", func(t *testing.T, dir string) {
			if err := os.Symlink(dir, dir); err != nil {
				t.Fatal(err)
			}
		}},
		{"dangling symlink", "no such file", func(t *testing.T, dir string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(dir), "gone"), dir); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, dirB, _ := twoDirRig(t)
			b := remotelog.TopicPartition{Topic: "b"}
			if err := os.Rename(dirB, dirB+".away"); err != nil {
				t.Fatal(err)
			}
			tc.put(t, dirB)
			next := r.c.cfg
			next.Retention.RetentionMs, next.Retention.LocalRetentionMs = ptr(86_400_000), ptr(0)
			if err := r.c.Reconfigure(next); err != nil {
				t.Fatal(err)
			}
			if _, err := r.c.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), dirB) {
				t.Fatalf("pass: %v, want an error naming %s", err, dirB)
			}
			if ok, why := r.c.LogDirsReady(); ok || !strings.Contains(why, tc.says) {
				t.Fatalf("ready %v %q, want not ready saying %q", ok, why, tc.says)
			}
			if st := r.status(b); st.Held != heldLogDirUnavailable {
				t.Fatalf("b-0: %+v", st)
			}
			if n := r.finishedOf(b); n != 2 {
				t.Fatalf("b-0 has %d finished copies, want its 2 kept", n)
			}
			if _, err := r.c.DeleteTopic(context.Background(), "b", "", "test"); !errors.Is(err, ErrLogDirUnavailable) {
				t.Fatalf("topics delete b: %v", err)
			}
			os.Remove(dirB)
			if err := os.Rename(dirB+".away", dirB); err != nil {
				t.Fatal(err)
			}
			r.sync()
			if ok, why := r.c.LogDirsReady(); !ok {
				t.Fatal(why)
			}
			if st := r.status(b); st.Held != "" {
				t.Fatalf("b-0 once back: %+v", st)
			}
		})
	}
}
