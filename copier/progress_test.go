package copier

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// stallBucket reads the first 1000 bytes of every .log upload, says so on
// started (once), then waits for the upload's context to end.
type stallBucket struct {
	rsm.Bucket
	once    sync.Once
	started chan struct{}
}

func (s *stallBucket) Upload(ctx context.Context, key string, rd io.Reader, size int64) error {
	if !strings.HasSuffix(key, kafkalog.LogSuffix) {
		return s.Bucket.Upload(ctx, key, rd, size)
	}
	if _, err := io.ReadFull(rd, make([]byte, 1000)); err != nil {
		return err
	}
	s.once.Do(func() { close(s.started) })
	<-ctx.Done()
	return ctx.Err()
}

// TestCopyProgressAndAbandon: a copy in flight shows in Status with the
// bytes read so far and logs its progress (bytes and rate); cancelled by
// shutdown, it says which copy it abandoned, and leaves no object.
func TestCopyProgressAndAbandon(t *testing.T) {
	b := &stallBucket{Bucket: memory.New(), started: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.OwnershipLease = 0
	r := newRig(t, cfg, b)
	logs, _ := r.observe()
	logs.notify = make(chan logRec, 64)
	r.c.rep.progressEvery = time.Millisecond
	size := writeSegment(t, r.dir(), 0, seq(0, 10), same(r.now.UnixMilli(), 10), 2000)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.c.Sync(ctx)
		done <- err
	}()
	<-b.started
	st := r.status(r.tp)
	if st.State != remotelog.TierCopying || st.Copying == nil || st.Copying.SentBytes != 1000 || st.Copying.Bytes != size || st.Copying.BaseOffset != 0 ||
		st.Copying.EndOffset != 9 {
		t.Fatalf("status during the copy: %+v %+v", st, st.Copying)
	}
	// Cancel and wait for the pass on every way out, so cleanup never
	// closes the store under it.
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	defer stop()
	for rec := range logs.notify {
		// The ticker may fire before the upload read its first 1000
		// bytes: wait for the line that has them.
		if rec.msg != "copy in progress" || rec.attrs["sent_bytes"] == "0" {
			continue
		}
		if rec.attrs["partition"] != "orders-0" || rec.attrs["base_offset"] != "0" || rec.attrs["sent_bytes"] != "1000" ||
			rec.attrs["bytes"] != fmt.Sprint(size) || rec.attrs["bytes_per_second"] == "" {
			t.Fatalf("progress line %+v", rec)
		}
		break
	}
	if err := stop(); err == nil {
		t.Fatal("the cancelled pass had no error")
	}
	ab := logs.with("copy abandoned")
	if len(ab) != 1 || ab[0].attrs["partition"] != "orders-0" || ab[0].attrs["base_offset"] != "0" || ab[0].attrs["end_offset"] != "9" ||
		ab[0].attrs["sent_bytes"] != "1000" {
		t.Fatalf("abandon lines %+v", ab)
	}
	if st := r.status(r.tp); st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitNextPass || st.Copying != nil {
		t.Fatalf("status after shutdown: %+v", st)
	}
	if left := r.objects(); len(left) != 0 {
		t.Fatalf("objects left: %v", left)
	}
}

// TestStartupNotes: an empty log dir is warned about once; the internal
// topics seen are listed once and stay out of the partitions' status.
func TestStartupNotes(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	empty := t.TempDir()
	r.c.cfg.LogDirs = append(r.c.cfg.LogDirs, empty)
	logs, _ := r.observe()
	writeSegment(t, r.dir(), 0, nil, nil, 0)
	for _, d := range []string{"__consumer_offsets-0", "__consumer_offsets-1", "__transaction_state-0"} {
		if err := os.MkdirAll(filepath.Join(r.logDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.sync()
	r.sync()
	if w := logs.with("log dir holds no <topic>-<partition> directories"); len(w) != 1 || w[0].attrs["dir"] != empty {
		t.Fatalf("empty log dir warnings %+v, want one for %s", w, empty)
	}
	if n := logs.with("internal topics"); len(n) != 1 || n[0].attrs["topics"] != "[__consumer_offsets __transaction_state]" {
		t.Fatalf("internal topic notes %+v", n)
	}
	s := r.c.Status()
	if fmt.Sprint(s.SkippedTopics) != "[__consumer_offsets __transaction_state]" || len(s.Partitions) != 1 || s.Partitions[0].Topic != "orders" {
		t.Fatalf("status %+v", s)
	}
}

// TestIndexCheckNamed: the warning about unusable indexes says which check
// failed.
func TestIndexCheckNamed(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	logs, _ := r.observe()
	size := writeSegment(t, r.dir(), 0, seq(0, 10), same(r.now.UnixMilli(), 10), 100)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	bs := size / 10
	idx, err := index.AppendOffsetEntry(nil, 0, index.OffsetEntry{Offset: 3, Position: int32(3*bs + 5)})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(r.dir(), kafkalog.FileName(0, kafkalog.IndexSuffix)), string(idx))
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d", n)
	}
	w := logs.with("indexes unusable")
	want := fmt.Sprintf("offset index entry 0 (offset 3) points at byte %d, not at the start of a batch (the next batch starts at byte %d)", 3*bs+5, 4*bs)
	if len(w) != 1 || w[0].attrs["check_failed"] != want {
		t.Fatalf("warnings %+v, want check_failed %q", w, want)
	}
}
