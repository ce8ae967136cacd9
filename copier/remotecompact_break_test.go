package copier

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// TestRemoteCompactionKeepsOldCopiesWhenTheMergedOneIsLost leaves a
// merged copy finished with the copies it replaces not yet deleted (a
// crash at compact.finished), then loses the merged copy's .log from the
// bucket (a bucket fault), and checks that the next pass does not delete
// the old copies on the merged row's word alone: they stay, with their
// objects, and the remote tier reads back the same map from them.
func TestRemoteCompactionKeepsOldCopiesWhenTheMergedOneIsLost(t *testing.T) {
	r := newRig(t, compactedConfig(DefaultRemoteCompaction()), nil)
	fs := &failingStore{MetadataStore: r.store, to: remotelog.DeleteSegmentStarted}
	c, err := New(r.c.cfg, fs, r.mgr, WithClock(func() time.Time { return r.now }), WithLogger(r.c.log))
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	h := &history{}
	for i := 0; i < 3; i++ {
		h.writeKeyedSegment(t, r.dir(), r.now.UnixMilli(), 4, nil, updates(int64(len(h.updates)), 20, 6)...)
	}
	h.activeSegment(t, r.dir())
	r.sync()
	old := readRemote(t, r)
	if len(old.rows) != 3 {
		t.Fatalf("%d copies, want 3", len(old.rows))
	}
	r.now = r.now.Add(time.Second)
	fs.fail = true
	if _, err := r.c.Sync(context.Background()); !errors.Is(err, errRemoteCompaction) {
		t.Fatalf("pass with the injected crash: %v", err)
	}
	fs.fail = false
	rows, _ := r.store.Segments(r.tp)
	var merged remotelog.SegmentMetadata
	for _, row := range rows {
		if row.CompactionOf != nil {
			merged = row
		}
	}
	if merged.State != remotelog.CopySegmentFinished {
		t.Fatalf("merged row %+v, want finished", merged)
	}
	// The bucket loses the merged copy's .log.
	if err := r.bucket.Delete(context.Background(), r.mgr.Key(merged, ".log")); err != nil {
		t.Fatal(err)
	}
	r.now = r.now.Add(time.Second)
	r.c.Sync(context.Background()) // may report the lost copy
	for _, o := range old.rows {
		cur, err := r.store.Segment(r.tp, o.StartOffset, o.ID)
		if err != nil || cur.State != remotelog.CopySegmentFinished {
			t.Fatalf("old copy %s [%d, %d] is %s (%v) though the copy replacing it lost its .log", o.ID, o.StartOffset, o.EndOffset, cur.State, err)
		}
		if missing, err := r.mgr.MissingObjects(context.Background(), o); err != nil || len(missing) != 0 {
			t.Fatalf("old copy %s lacks %v (%v)", o.ID, missing, err)
		}
	}
	// Readers see the old copies again: the merged one, its .log gone,
	// is marked damaged and no longer supersedes them.
	fin, err := r.store.FinishedSegments(r.tp)
	if err != nil {
		t.Fatal(err)
	}
	live := map[remotelog.SegmentID]bool{}
	for _, m := range remotelog.Supersede(fin) {
		live[m.ID] = true
	}
	for _, o := range old.rows {
		if !live[o.ID] {
			t.Fatalf("old copy %s is still hidden by the lost merged copy", o.ID)
		}
	}
}
