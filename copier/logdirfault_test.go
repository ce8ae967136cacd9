package copier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tierd/tierd/internal/remotelog"
)

// twoDirRig is a rig with a second log dir: partitions a-0 and c-0 in
// the first, b-0 in the second, each with two old rolled segments (ten
// days old) and an active one, all copied, nothing deleted yet
// (retention -1); file.delete.delay.ms and remote.log.delete.delay.ms 0.
func twoDirRig(t *testing.T, opts ...Option) (r *rig, dirB string, logs *logRecorder) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs, cfg.RemoteLogDeleteDelayMs = 0, 0
	cfg.Retention.RetentionMs, cfg.Retention.LocalRetentionMs = ptr(-1), ptr(-1)
	r = newRig(t, cfg, nil)
	dirB = filepath.Join(t.TempDir(), "disk-b")
	r.c.cfg.LogDirs = []string{r.logDir, dirB}
	logs, _ = r.observe(opts...)
	old := r.now.Add(-240 * time.Hour).UnixMilli()
	for _, d := range []string{filepath.Join(r.logDir, "a-0"), filepath.Join(r.logDir, "c-0"), filepath.Join(dirB, "b-0")} {
		writeSegment(t, d, 0, seq(0, 10), same(old, 10), 10)
		writeSegment(t, d, 10, seq(10, 10), same(old, 10), 10)
		writeSegment(t, d, 20, nil, nil, 0)
	}
	if n := r.sync(); n != 6 {
		t.Fatalf("copied %d, want 6", n)
	}
	return r, dirB, logs
}

func (r *rig) finishedOf(tp remotelog.TopicPartition) int {
	fin, err := r.store.FinishedSegments(tp)
	if err != nil {
		r.t.Fatal(err)
	}
	return len(fin)
}

// TestLogDirVanishes: a log dir disappears while tierd runs (a disk
// unmounted, here the directory renamed away), and retention is lowered
// so that every copy is past it. tierd is not ready and says why; the
// partition of the missing dir is held, not remote only, and keeps its
// copies; a whole-partition deletion due meanwhile waits; an operator's
// deletion is refused with a clear error; the healthy log dir's
// partition goes on. Once the dir is back, all of it resumes.
func TestLogDirVanishes(t *testing.T) {
	r, dirB, logs := twoDirRig(t)
	ctx := context.Background()
	a, b, c := remotelog.TopicPartition{Topic: "a"}, remotelog.TopicPartition{Topic: "b"}, remotelog.TopicPartition{Topic: "c"}
	// c's topic is deleted in Kafka and an operator orders its copies
	// deleted: due at the next pass.
	os.RemoveAll(filepath.Join(r.logDir, "c-0"))
	if _, err := r.c.DeleteTopic(ctx, "c", "", "test"); err != nil {
		t.Fatal(err)
	}
	objects := len(r.objects())

	if err := os.Rename(dirB, dirB+".away"); err != nil {
		t.Fatal(err)
	}
	next := r.c.cfg
	next.Retention.RetentionMs, next.Retention.LocalRetentionMs = ptr(86_400_000), ptr(0)
	if err := r.c.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Sync(ctx); err == nil || !strings.Contains(err.Error(), dirB) {
		t.Fatalf("pass with a log dir missing: err %v, want one naming %s", err, dirB)
	}
	if ok, why := r.c.LogDirsReady(); ok || !strings.Contains(why, dirB) || !strings.Contains(why, "no such file") {
		t.Fatalf("ready %v %q, want not ready naming %s", ok, why, dirB)
	}
	st := r.status(b)
	if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitHeld || st.Held != heldLogDirUnavailable || !strings.Contains(st.Detail, dirB) {
		t.Fatalf("status of b-0 with its log dir missing: %+v", st)
	}
	if n := r.finishedOf(b); n != 2 {
		t.Fatalf("b-0 has %d finished copies, want its 2 kept", n)
	}
	if ds, _ := r.store.Deletions(&c); len(ds) != 1 || ds[0].State != remotelog.DeletionPending {
		t.Fatalf("c-0's due deletion ran while a log dir was missing: %+v", ds)
	}
	if n := r.finishedOf(a); n != 0 {
		t.Errorf("a-0, in the log dir still there, kept %d copies past retention", n)
	}
	if got := len(r.objects()); got >= objects {
		t.Errorf("objects %d -> %d: a-0's copies past retention were not deleted", objects, got)
	}
	_, err := r.c.DeleteTopic(ctx, "b", "", "test")
	if !errors.Is(err, ErrLogDirUnavailable) || !errors.Is(err, remotelog.ErrRefused) || !strings.Contains(err.Error(), dirB) {
		t.Fatalf("topics delete b with its log dir missing: %v", err)
	}
	if g := gauge(t, r.c.m.dirAvailable.WithLabelValues(dirB)); g != 0 {
		t.Errorf("tierd_copier_log_dir_available{%s} %v", dirB, g)
	}
	if n := testutil.ToFloat64(r.c.m.held.WithLabelValues(heldLogDirUnavailable)); n < 1 {
		t.Errorf("tierd_copier_partitions_held{log_dir_unavailable} %v", n)
	}
	if len(logs.with("log dir unavailable")) != 1 {
		t.Errorf("log dir unavailable logged %d times", len(logs.with("log dir unavailable")))
	}

	if err := os.Rename(dirB+".away", dirB); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if ok, why := r.c.LogDirsReady(); !ok {
		t.Fatalf("not ready once the log dir is back: %s", why)
	}
	if n := r.finishedOf(b); n != 0 {
		t.Errorf("b-0 kept %d copies past retention once back", n)
	}
	if ds, _ := r.store.Deletions(&c); len(ds) != 0 {
		t.Errorf("c-0's deletion did not run once the log dir was back: %+v", ds)
	}
	if st := r.status(b); st.State != remotelog.TierUpToDate {
		t.Errorf("b-0 once back: %+v", st)
	}
	if _, err := r.c.DeleteTopic(ctx, "b", "", "test"); !errors.Is(err, ErrTopicStillLocal) {
		t.Errorf("topics delete b once back: %v, want refused as still local", err)
	}
}

// TestLogDirUnmounted: a disk unmounted under its mount point leaves an
// empty directory at the log dir's path. The check tierd run gives
// (WithLogDirCheck: its .tierd.lock is not there) makes it unavailable as
// a missing dir is; remounted, it is available again.
func TestLogDirUnmounted(t *testing.T) {
	var checked atomic.Pointer[string] // the log dir whose disk is checked, once set up
	check := func(d string) error {
		if p := checked.Load(); p != nil && d == *p {
			if _, err := os.Stat(filepath.Join(d, "disk-id")); err != nil {
				return fmt.Errorf("not the log dir tierd started on: %w", err)
			}
		}
		return nil
	}
	r, dirB, _ := twoDirRig(t, WithLogDirCheck(check))
	writeFile(t, filepath.Join(dirB, "disk-id"), "b\n")
	checked.Store(&dirB)
	r.sync()
	b := remotelog.TopicPartition{Topic: "b"}
	// Unmounted: the disk's files are elsewhere, an empty mount point is left.
	if err := os.Rename(dirB, dirB+".disk"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dirB, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("pass over an empty mount point had no error")
	}
	if ok, why := r.c.LogDirsReady(); ok || !strings.Contains(why, "not the log dir tierd started on") {
		t.Fatalf("ready %v %q", ok, why)
	}
	if st := r.status(b); st.Held != heldLogDirUnavailable {
		t.Fatalf("b-0 with its disk unmounted: %+v", st)
	}
	if _, err := r.c.DeleteTopic(context.Background(), "b", "", "test"); !errors.Is(err, ErrLogDirUnavailable) {
		t.Fatalf("topics delete b with its disk unmounted: %v", err)
	}
	// Mounted again.
	os.Remove(dirB)
	if err := os.Rename(dirB+".disk", dirB); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if ok, why := r.c.LogDirsReady(); !ok {
		t.Fatal(why)
	}
	if st := r.status(b); st.State != remotelog.TierUpToDate || r.finishedOf(b) != 2 {
		t.Fatalf("b-0 once mounted again: %+v, %d copies", st, r.finishedOf(b))
	}
}

// TestLogDirUnreadable: a log dir tierd may not list (chmod 0) is
// unavailable too. Root lists any directory, so this runs as another
// user only; the renamed and unmounted cases cover root.
func TestLogDirUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root lists a mode 0 directory: TestLogDirVanishes and TestLogDirUnmounted cover the fault")
	}
	r, dirB, _ := twoDirRig(t)
	os.Chmod(dirB, 0)
	t.Cleanup(func() { os.Chmod(dirB, 0o755) })
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("pass over an unreadable log dir had no error")
	}
	if ok, why := r.c.LogDirsReady(); ok || !strings.Contains(why, "permission denied") {
		t.Fatalf("ready %v %q", ok, why)
	}
	if st := r.status(remotelog.TopicPartition{Topic: "b"}); st.Held != heldLogDirUnavailable {
		t.Fatalf("b-0: %+v", st)
	}
	os.Chmod(dirB, 0o755)
	r.sync()
	if ok, why := r.c.LogDirsReady(); !ok {
		t.Fatal(why)
	}
}
