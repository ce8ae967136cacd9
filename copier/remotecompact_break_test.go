package copier

import (
	"context"
	"errors"
	"fmt"
	"github.com/tierd/tierd/copier/remotecompact"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"os"
	"path/filepath"
	"slices"
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
	if _, err := r.c.Sync(context.Background()); !errors.Is(err, remotecompact.ErrCompaction) {
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
	// The merged copy, marked damaged, supersedes nothing: it is deleted
	// (the copies it merged are whole) and they may be merged again.
	after := readRemote(t, r)
	checkModel(t, "after the merged copy was lost", after, h, 60)
	for _, m := range after.rows {
		if m.ID == merged.ID {
			t.Fatalf("readers still see the merged copy whose .log is gone")
		}
		if missing, err := r.mgr.MissingObjects(context.Background(), m); err != nil || len(missing) != 0 {
			t.Fatalf("copy %s read lacks %v (%v)", m.ID, missing, err)
		}
	}
}

// writeRecords writes a rolled segment at base holding each update at its
// own offset (one batch each; an offset absent from at is a record the
// cleaner removed), with an empty .index and a .timeindex.
func writeRecords(t *testing.T, dir string, base, ts int64, at map[int64]update) {
	t.Helper()
	var offs []int64
	for o := range at {
		offs = append(offs, o)
	}
	slices.Sort(offs)
	var log []byte
	for _, o := range offs {
		u := at[o]
		r := batch.Record{Timestamp: ts, Key: []byte(u.key)}
		if !u.tomb {
			r.Value = []byte(u.value)
		}
		b, err := batch.AppendBatch(nil, batch.NewParams(o, 0), []batch.Record{r}, nil)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, b...)
	}
	for _, suffix := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix, kafkalog.TxnIndexSuffix} {
		os.Remove(filepath.Join(dir, kafkalog.FileName(base, suffix)))
	}
	if err := os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.LogSuffix)), log, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.IndexSuffix)), nil, 0o644)
	ti, _ := index.AppendTimeEntry(nil, base, index.TimeEntry{Timestamp: ts, Offset: offs[len(offs)-1]})
	os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.TimeIndexSuffix)), ti, 0o644)
}

// TestCompactedCleanerMergeKeepsTombstones: segment 0 holds k=v1 and is
// copied and deleted locally; segment 10 holds k's tombstone and is
// copied but kept locally. The broker's cleaner, past the tombstone's
// delete horizon, then merges segment 10 with the new segment 20 into one
// segment at 10 without the tombstone (Kafka's cleaner groups clean and
// dirty segments). The copy of that segment covers the copy of segment
// 10, whose tombstone is the only one left: a reader of the remote tier
// must still find k deleted, not v1 back.
func TestCompactedCleanerMergeKeepsTombstones(t *testing.T) {
	cfg := compactedConfig(RemoteCompaction{})
	tc := cfg.Topics["orders"]
	tc.Retention.LocalRetentionMs = ptr(-1)
	cfg.Topics["orders"] = tc
	r := newRig(t, cfg, nil)
	dir := r.dir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ts := r.now.UnixMilli()
	seg0 := map[int64]update{}
	for o := int64(0); o < 10; o++ {
		seg0[o] = update{key: fmt.Sprintf("a%d", o), value: "x"}
	}
	seg0[3] = update{key: "k", value: "v1"}
	seg10 := map[int64]update{}
	for o := int64(10); o < 20; o++ {
		seg10[o] = update{key: fmt.Sprintf("b%d", o), value: "y"}
	}
	seg10[15] = update{key: "k", tomb: true}
	writeRecords(t, dir, 0, ts, seg0)
	writeRecords(t, dir, 10, ts, seg10)
	h := &history{updates: make([]update, 20)}
	h.activeSegment(t, dir)
	if n := r.sync(); n != 2 {
		t.Fatalf("copied %d, want 2", n)
	}
	// Segment 0 leaves local disk (its copy is the proof).
	os.Rename(filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix)), filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix)+".deleted"))
	os.Remove(filepath.Join(dir, kafkalog.FileName(0, kafkalog.IndexSuffix)))
	os.Remove(filepath.Join(dir, kafkalog.FileName(0, kafkalog.TimeIndexSuffix)))
	if got := readRemote(t, r).latest(); got["k"] != "" {
		t.Fatalf("after the copies k reads %q, want deleted", got["k"])
	}
	// The cleaner merges 10 and 20 into 10 and drops the tombstone.
	merged := map[int64]update{}
	for o, u := range seg10 {
		if !u.tomb {
			merged[o] = u
		}
	}
	for o := int64(20); o < 30; o++ {
		merged[o] = update{key: fmt.Sprintf("c%d", o), value: "z"}
	}
	os.Remove(filepath.Join(dir, kafkalog.FileName(20, kafkalog.LogSuffix)))
	os.Remove(filepath.Join(dir, kafkalog.FileName(20, kafkalog.IndexSuffix)))
	os.Remove(filepath.Join(dir, kafkalog.FileName(20, kafkalog.TimeIndexSuffix)))
	writeRecords(t, dir, 10, ts, merged)
	h.updates = make([]update, 30)
	h.activeSegment(t, dir)
	for i := 0; i < 3; i++ {
		r.now = r.now.Add(time.Second)
		r.c.Sync(context.Background())
	}
	if got := readRemote(t, r).latest(); got["k"] != "" {
		t.Fatalf("k reads %q from the remote tier: its tombstone's only copy was superseded and v1 came back", got["k"])
	}
}
