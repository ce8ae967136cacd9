package copier

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// syncedWrites reads the store's synced writes (Pebble batch commits)
// from its registry.
func syncedWrites(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tierd_rlmm_synced_writes_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no tierd_rlmm_synced_writes_total")
	return 0
}

// countedRig is a rig whose store counts its synced writes in reg.
func countedRig(t *testing.T, cfg Config, b rsm.Bucket) (*rig, *prometheus.Registry) {
	t.Helper()
	r := newRig(t, cfg, b)
	reg := prometheus.NewRegistry()
	store, err := rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem()), rlmm.WithRegisterer(reg), rlmm.WithClock(func() time.Time { return r.now }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r.store = store
	if r.c, err = New(r.c.cfg, store, r.mgr, WithClock(func() time.Time { return r.now })); err != nil {
		t.Fatal(err)
	}
	return r, reg
}

// oldAndNew writes old one-record segments 5 hours old, then young ones
// 1 hour old, then an empty active segment, and copies them all in one
// pass with retention.ms -1. It returns the number of objects a copy
// has.
func oldAndNew(t *testing.T, r *rig, old, young int) int {
	t.Helper()
	for i := 0; i < old+young; i++ {
		age := 5 * time.Hour
		if i >= old {
			age = time.Hour
		}
		writeSegment(t, r.dir(), int64(i), []int64{int64(i)}, []int64{r.now.Add(-age).UnixMilli()}, 10)
	}
	writeSegment(t, r.dir(), int64(old+young), nil, nil, 0)
	r.c.cfg.Retention.RetentionMs = ptr(-1)
	if n := r.sync(); n != old+young {
		t.Fatalf("copied %d segments, want %d", n, old+young)
	}
	r.c.cfg.Retention.RetentionMs = ptr(int64(150 * time.Minute / time.Millisecond))
	n := len(r.objects())
	if n == 0 || n%(old+young) != 0 {
		t.Fatalf("%d objects for %d copies", n, old+young)
	}
	return n / (old + young)
}

// TestRetentionBatchesStateWrites: a retention pass that deletes 300
// copies moves them through the delete protocol in groups of deleteBatch
// (256), each costing a fixed number of synced metadata writes (the log
// start offset, DELETE_SEGMENT_STARTED of the group,
// DELETE_SEGMENT_FINISHED of the group), not two or three per copy; the
// copies end deleted, their objects gone, and the log start offset past
// them.
func TestRetentionBatchesStateWrites(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.LocalRetentionMs = ptr(-1)
	r, reg := countedRig(t, cfg, nil)
	const old, young = 300, 3
	per := oldAndNew(t, r, old, young)
	before := syncedWrites(t, reg)
	r.sync()
	writes := syncedWrites(t, reg) - before
	groups := (old + deleteBatch - 1) / deleteBatch
	if writes > float64(3*groups+2) {
		t.Errorf("a pass deleting %d copies made %v synced writes, want at most %d (3 per group of %d, and 2 for the rest of the pass)",
			old, writes, 3*groups+2, deleteBatch)
	}
	t.Logf("a pass deleting %d copies: %v synced writes", old, writes)
	if st := r.states(); st[remotelog.DeleteSegmentFinished] != old || st[remotelog.CopySegmentFinished] != young || len(st) != 2 {
		t.Fatalf("states %v, want %d deleted and %d finished", st, old, young)
	}
	if got := r.offsets().LogStartOffset; got != old {
		t.Fatalf("log start offset %d, want %d", got, old)
	}
	if n := len(r.objects()); n != per*young {
		t.Fatalf("%d objects left, want the %d of %d copies", n, per*young, young)
	}
}

// deleteFaultBucket fails the deletes of keys containing failOn while it
// is set.
type deleteFaultBucket struct {
	rsm.Bucket
	mu     sync.Mutex
	failOn string
}

func (f *deleteFaultBucket) Delete(ctx context.Context, key string) error {
	f.mu.Lock()
	fail := f.failOn != "" && strings.Contains(key, f.failOn)
	f.mu.Unlock()
	if fail {
		return errors.New("injected: 503 SlowDown")
	}
	return f.Bucket.Delete(ctx, key)
}

func (f *deleteFaultBucket) set(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failOn = s
}

// TestRetentionGroupOneDeleteFails: when one copy's objects fail to go,
// only that copy stays DELETE_SEGMENT_STARTED (its objects untouched);
// the other copies of its group are deleted and DELETE_SEGMENT_FINISHED,
// the pass reports the error, and the next pass finishes the one left.
func TestRetentionGroupOneDeleteFails(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.LocalRetentionMs = ptr(-1)
	fb := &deleteFaultBucket{Bucket: memory.New()}
	r := newRig(t, cfg, fb)
	const old, young = 6, 2
	per := oldAndNew(t, r, old, young)
	fin, err := r.store.FinishedSegments(r.tp)
	if err != nil || len(fin) != old+young {
		t.Fatalf("finished copies %d, %v", len(fin), err)
	}
	bad := fin[2]
	fb.set(bad.ID.String())
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("a pass whose delete failed reported no error")
	}
	rows, err := r.store.Segments(r.tp)
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range rows {
		want := remotelog.DeleteSegmentFinished
		switch {
		case row.ID == bad.ID:
			want = remotelog.DeleteSegmentStarted
		case i >= old:
			want = remotelog.CopySegmentFinished
		}
		if row.State != want {
			t.Errorf("copy at %d: %s, want %s", row.StartOffset, row.State, want)
		}
	}
	if n := len(r.objects()); n != per*(young+1) {
		t.Errorf("%d objects, want those of the %d young copies and of the one whose delete failed", n, young)
	}
	if got := r.offsets().LogStartOffset; got != old {
		t.Errorf("log start offset %d, want %d", got, old)
	}
	fb.set("")
	r.sync()
	if st := r.states(); st[remotelog.DeleteSegmentFinished] != old || st[remotelog.CopySegmentFinished] != young || len(st) != 2 {
		t.Fatalf("states after the next pass %v, want %d deleted and %d finished", st, old, young)
	}
	if n := len(r.objects()); n != per*young {
		t.Fatalf("%d objects after the next pass, want %d", n, per*young)
	}
}
