package copier

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/memory"
)

// TestValidateTopicEntries: Validate reports the bad values of the
// topics' entries, each under its topic.
func TestValidateTopicEntries(t *testing.T) {
	bad := DefaultConfig()
	tiny := int64(10)
	bad.Topics = map[string]topics.TopicConfig{"x": {Retention: topics.Retention{RetentionMs: ptr(-3), LocalRetentionBytes: ptr(-3)}, SegmentBytes: &tiny}}
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "topics: x: retention.ms -3") || !strings.Contains(err.Error(), "local.retention.bytes -3") ||
		!strings.Contains(err.Error(), "copier: topics: x: segment.bytes 10 is out of range") {
		t.Errorf("Validate = %v", err)
	}
}

// TestCopyThenLocalRetention: rolled segments are copied oldest first, the
// active one never; local copies go only after their copy finished and
// local retention is breached.
func TestCopyThenLocalRetention(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.LocalRetentionMs = ptr(60_000)
	r := newRig(t, cfg, nil)
	ts := r.now.UnixMilli()
	for i := int64(0); i < 4; i++ {
		writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(ts, 10), 100)
	}
	if n := r.sync(); n != 3 {
		t.Fatalf("copied %d, want 3 (the active segment stays)", n)
	}
	if got := r.states(); got[remotelog.CopySegmentFinished] != 3 || len(got) != 1 {
		t.Fatalf("states %v", got)
	}
	if off := r.offsets(); off.HighestTieredOffset != 29 || off.LogStartOffset != 0 {
		t.Fatalf("offsets %+v", off)
	}
	// 7 objects per copy: log, index, timeindex, epochs, manifest (no txn, no snapshot).
	if n := len(r.objects()); n != 15 {
		t.Fatalf("%d objects: %v", n, r.objects())
	}
	if r.sync() != 0 || !reflect.DeepEqual(r.localBases(), []int64{0, 10, 20, 30}) {
		t.Fatalf("second pass copied again or deleted early: %v", r.localBases())
	}
	r.now = r.now.Add(61 * 1000 * 1e6)
	r.sync()
	if !reflect.DeepEqual(r.localBases(), []int64{30}) {
		t.Fatalf("after local.retention.ms: %v", r.localBases())
	}
	if off := r.offsets(); off.LocalLogStartOffset != 30 || off.LogStartOffset != 0 {
		t.Fatalf("offsets %+v", off)
	}
	if left, _ := filepath.Glob(filepath.Join(r.dir(), "*.deleted")); len(left) != 0 {
		t.Fatalf("with file_delete_delay 0 the .deleted files go on the next pass: %v", left)
	}
}

// TestNeverDeletesUncopied: a failing upload leaves the local segment, the
// failed attempt's objects and row are cleaned, and the retry uses a new id.
func TestNeverDeletesUncopied(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.LocalRetentionMs = ptr(0)
	fb := &faultBucket{Bucket: memory.New(), failOn: ".timeindex", fails: 1}
	r := newRig(t, cfg, fb)
	old := r.now.UnixMilli() - 3_600_000
	writeSegment(t, r.dir(), 0, seq(0, 5), same(old, 5), 10)
	writeSegment(t, r.dir(), 5, seq(5, 5), same(old, 5), 10)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	if _, err := r.c.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "SlowDown") {
		t.Fatalf("sync = %v, want the injected failure", err)
	}
	if !reflect.DeepEqual(r.localBases(), []int64{0, 5, 10}) {
		t.Fatalf("uncopied segments deleted: %v", r.localBases())
	}
	if st := r.states(); st[remotelog.DeleteSegmentFinished] != 1 || st[remotelog.CopySegmentFinished] != 0 {
		t.Fatalf("states after failure %v", st)
	}
	if objs := r.objects(); len(objs) != 0 {
		t.Fatalf("failed copy left objects %v", objs)
	}
	r.sync()
	rows, _ := r.store.Segments(r.tp)
	ids := map[remotelog.SegmentID]bool{}
	for _, row := range rows {
		ids[row.ID] = true
	}
	if st := r.states(); st[remotelog.CopySegmentFinished] != 2 || len(ids) != 3 {
		t.Fatalf("after retry: states %v, %d ids", st, len(ids))
	}
	if !reflect.DeepEqual(r.localBases(), []int64{10}) {
		t.Fatalf("local after retry: %v", r.localBases())
	}
}

// TestHighWatermarkGate: with Kafka's replication-offset-checkpoint, only
// segments below the high watermark are copied.
func TestHighWatermarkGate(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	ts := r.now.UnixMilli()
	for i := int64(0); i < 4; i++ {
		writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(ts, 10), 10)
	}
	ck := filepath.Join(r.logDir, kafkalog.ReplicationOffsetCheckpointFile)
	os.WriteFile(ck, []byte("0\n1\norders 0 15\n"), 0o644)
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d with high watermark 15, want 1", n)
	}
	os.WriteFile(ck, []byte("0\n1\norders 0 30\n"), 0o644)
	if n := r.sync(); n != 2 {
		t.Fatalf("copied %d with high watermark 30, want 2", n)
	}
	os.WriteFile(ck, []byte("0\n0\n"), 0o644) // partition not in the file: nothing committed
	writeSegment(t, r.dir(), 40, seq(40, 1), same(ts, 1), 10)
	if n := r.sync(); n != 0 {
		t.Fatalf("copied %d with no high watermark entry", n)
	}
}

// TestBrokerOwned: local deletion is off; a segment the broker deleted
// before tierd copied it is reported as a gap, and copying carries on.
func TestBrokerOwned(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BrokerOwned = yes(true)
	cfg.Retention.LocalRetentionMs = ptr(0)
	r := newRig(t, cfg, nil)
	old := r.now.UnixMilli() - 3_600_000
	for i := int64(0); i < 3; i++ {
		writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(old, 10), 10)
	}
	r.sync()
	if !reflect.DeepEqual(r.localBases(), []int64{0, 10, 20}) {
		t.Fatalf("broker-owned dir lost files: %v", r.localBases())
	}
	// The broker rolls twice and deletes segment 20 (and 30) before tierd runs.
	writeSegment(t, r.dir(), 30, seq(30, 10), same(old, 10), 10)
	writeSegment(t, r.dir(), 40, seq(40, 10), same(old, 10), 10)
	writeSegment(t, r.dir(), 50, nil, nil, 0)
	for _, b := range []int64{0, 10, 20, 30} {
		for _, s := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
			os.Remove(filepath.Join(r.dir(), kafkalog.FileName(b, s)))
		}
	}
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d, want segment 40", n)
	}
	if got := testutilCounter(t, r.c.m.gaps); got != 1 {
		t.Fatalf("gaps reported %v, want 1", got)
	}
	if off := r.offsets(); off.HighestTieredOffset != 49 {
		t.Fatalf("offsets %+v", off)
	}
}

// TestOrphanCleanup: a row left in COPY_SEGMENT_STARTED by a crash, and its
// partial objects, are deleted on the next pass; the segment is copied anew.
func TestOrphanCleanup(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	writeSegment(t, r.dir(), 0, seq(0, 3), same(r.now.UnixMilli(), 3), 10)
	writeSegment(t, r.dir(), 3, nil, nil, 0)
	orphan := remotelog.SegmentMetadata{TopicPartition: r.tp, ID: remotelog.NewSegmentID(), StartOffset: 0, EndOffset: 2,
		State: remotelog.CopySegmentStarted, SizeInBytes: 1}
	if err := r.store.AddSegment(orphan); err != nil {
		t.Fatal(err)
	}
	partial := r.mgr.Key(orphan, ".log")
	r.bucket.Upload(context.Background(), partial, strings.NewReader("half"), 4)
	r.sync()
	got, _ := r.store.Segment(r.tp, 0, orphan.ID)
	if got.State != remotelog.DeleteSegmentFinished {
		t.Fatalf("orphan state %s", got.State)
	}
	for _, k := range r.objects() {
		if strings.Contains(k, orphan.ID.String()) {
			t.Fatalf("orphan object %s left", k)
		}
	}
	if st := r.states(); st[remotelog.CopySegmentFinished] != 1 {
		t.Fatalf("states %v", st)
	}
}
