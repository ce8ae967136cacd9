package copier

import (
	"context"
	"errors"
	"fmt"
	"os"
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

// TestCompactedRecreatedTopicWithoutIDsKeptLocally tiers a segment of a
// compacted topic whose directory has no partition.metadata (no topic
// ids), while local retention keeps it; the topic is then deleted and
// re-created, and its new log writes a segment over the same offsets with
// other records. With local retention on, the new segment must stay on
// local disk: the old incarnation's copy of its offsets is no proof that
// its records are tiered (nothing tells a re-cleaned segment from another
// log without topic ids).
func TestCompactedRecreatedTopicWithoutIDsKeptLocally(t *testing.T) {
	keep := compactedConfig(DefaultRemoteCompaction())
	tc := keep.Topics["orders"]
	tc.Retention.LocalRetentionMs = ptr(-1)
	keep.Topics["orders"] = tc
	r := newRig(t, keep, nil)
	h := &history{}
	h.writeKeyedSegment(t, r.dir(), r.now.UnixMilli(), 4, nil, updates(0, 20, 5)...)
	h.activeSegment(t, r.dir())
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d, want 1", n)
	}
	if got := r.localBases(); len(got) != 2 {
		t.Fatalf("local segments %v, want both kept", got)
	}
	// The topic is deleted and re-created; its new log has other records.
	if err := os.RemoveAll(r.dir()); err != nil {
		t.Fatal(err)
	}
	h2 := &history{}
	us := make([]update, 20)
	for i := range us {
		us[i] = update{key: fmt.Sprintf("new-%d", i), value: "v"}
	}
	h2.writeKeyedSegment(t, r.dir(), r.now.UnixMilli(), 20, nil, us...)
	h2.activeSegment(t, r.dir())
	cfg := r.c.cfg
	cfg.Topics = compactedConfig(DefaultRemoteCompaction()).Topics
	c, err := New(cfg, r.store, r.mgr, WithClock(func() time.Time { return r.now }))
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	r.now = r.now.Add(time.Second)
	r.c.Sync(context.Background()) // may report the partition held
	if got := r.localBases(); len(got) != 2 || got[0] != 0 {
		t.Fatalf("local segments %v: the new incarnation's segment 0, never copied, was deleted", got)
	}
}
