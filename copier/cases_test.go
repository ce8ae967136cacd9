package copier

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/seglog"
)

// Case 1: an idle partition whose only closed segment was rolled by time
// (the next segment is empty) gets it copied, then deleted locally and
// remotely by retention.
func TestCaseIdlePartitionRolledByTime(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.RetentionMs = ptr(2 * 3600 * 1000)
	cfg.Retention.LocalRetentionMs = ptr(3600 * 1000)
	r := newRig(t, cfg, nil)
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes, scfg.SegmentMs = seglog.MinSegmentBytes, 60_000
	clock := r.now.Add(-3 * time.Hour)
	l, err := seglog.Open(r.dir(), scfg, seglog.WithClock(func() time.Time { return clock }))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		l.Append(seglog.Record{Value: []byte("idle")})
	}
	clock = clock.Add(2 * time.Minute) // one more record after segment.ms rolls the segment
	l.Append(seglog.Record{Value: []byte("late")})
	if segs := l.Segments(); len(segs) != 2 || segs[1].BaseOffset != 5 || segs[1].Size == 0 {
		t.Fatalf("segments %+v", segs)
	}
	l.Close()
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d, want the time-rolled segment", n)
	}
	r.now = r.now.Add(time.Hour) // the segment is now 4h old: past both retentions
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{5}) {
		t.Fatalf("local %v", got)
	}
	if off := r.offsets(); off.LogStartOffset != 5 {
		t.Fatalf("offsets %+v", off)
	}
	if st := r.states(); st[remotelog.DeleteSegmentFinished] != 1 || len(r.objects()) != 0 {
		t.Fatalf("states %v objects %v", st, r.objects())
	}
}

// hundred writes a 100-byte one-record segment at base.
func hundred(t *testing.T, r *rig, base int64) {
	if n := writeSegment(t, r.dir(), base, []int64{base}, []int64{r.now.UnixMilli()}, 32); n != 100 {
		t.Fatalf("segment of %d bytes", n)
	}
}

// Case 2: a copy stuck in COPY_SEGMENT_STARTED, with part of its upload in
// the bucket, does not count toward the remote size; finished copies are
// deleted only once the stuck copy is cleaned up, retried, and the log
// really is over retention.bytes.
func TestCaseStuckCopyNotCounted(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.RetentionBytes = ptr(400)
	cfg.Retention.LocalRetentionBytes = ptr(0)
	r := newRig(t, cfg, nil)
	for b := int64(0); b < 3; b++ {
		hundred(t, r, b)
	}
	writeSegment(t, r.dir(), 3, nil, nil, 0)
	r.sync() // 0-2 copied, then deleted locally
	r.c.cfg.Retention.LocalRetentionBytes = ptr(-2)
	os.Remove(filepath.Join(r.dir(), kafkalog.FileName(3, kafkalog.LogSuffix)))
	hundred(t, r, 3)
	writeSegment(t, r.dir(), 4, nil, nil, 0)
	stuck := remotelog.SegmentMetadata{TopicPartition: r.tp, ID: remotelog.NewSegmentID(), StartOffset: 3, EndOffset: 3,
		SizeInBytes: 100, State: remotelog.CopySegmentStarted}
	if err := r.store.AddSegment(stuck); err != nil {
		t.Fatal(err)
	}
	r.bucket.Upload(context.Background(), r.mgr.Key(stuck, ".log"), strings.NewReader(strings.Repeat("p", 60)), 60)
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{3, 4}) {
		t.Fatalf("local %v", got)
	}
	// Local 100 + remote 300 = 400: within retention.bytes. The stuck
	// copy's 100 bytes must not count a second time.
	p := &partition{tp: r.tp, dir: r.dir(), hw: -1, brokerLSO: -1}
	p.segs, _ = listSegments(r.dir())
	p.limits = r.c.cfg.resolve("orders", nil).Limits
	if err := r.c.remoteRetention(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if st := r.states(); st[remotelog.CopySegmentFinished] != 3 || st[remotelog.CopySegmentStarted] != 1 || r.offsets().LogStartOffset != 0 {
		t.Fatalf("with a stuck copy: states %v", st)
	}
	r.sync() // cleans the stuck copy, retries it; still 400 bytes
	if st := r.states(); st[remotelog.CopySegmentFinished] != 4 || r.offsets().LogStartOffset != 0 {
		t.Fatalf("after retry: states %v offsets %+v", st, r.offsets())
	}
	for _, k := range r.objects() {
		if strings.Contains(k, stuck.ID.String()) {
			t.Fatalf("stuck copy's object left: %s", k)
		}
	}
	os.Remove(filepath.Join(r.dir(), kafkalog.FileName(4, kafkalog.LogSuffix)))
	hundred(t, r, 4)
	writeSegment(t, r.dir(), 5, nil, nil, 0)
	r.sync() // 500 bytes: the oldest copy goes, exactly one
	if off := r.offsets(); off.LogStartOffset != 1 {
		t.Fatalf("over retention.bytes: offsets %+v", off)
	}
}

// Case 5: a segment with no producer snapshot and no .txnindex copies, and
// its transaction index reads back empty.
func TestCaseNoSnapshotNoTxnIndex(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	writeSegment(t, r.dir(), 0, seq(0, 3), same(r.now.UnixMilli(), 3), 10)
	writeSegment(t, r.dir(), 3, nil, nil, 0)
	if r.sync() != 1 {
		t.Fatal("not copied")
	}
	fin, _ := r.store.FinishedSegments(r.tp)
	if fin[0].TxnIndexPresent || fin[0].ProducerSnapshotPresent {
		t.Fatalf("row %+v", fin[0])
	}
	for _, it := range []remotelog.IndexType{remotelog.TransactionIndex, remotelog.ProducerSnapshot} {
		data, err := r.mgr.FetchIndex(context.Background(), fin[0], it)
		if err != nil || len(data) != 0 {
			t.Fatalf("%s: %d bytes, %v", it, len(data), err)
		}
	}
	// With both present they go up and read back.
	os.WriteFile(filepath.Join(r.dir(), kafkalog.FileName(3, kafkalog.TxnIndexSuffix)), make([]byte, 34), 0o644)
	os.WriteFile(filepath.Join(r.dir(), kafkalog.FileName(6, kafkalog.SnapshotSuffix)), []byte("snapshot"), 0o644)
	os.Remove(filepath.Join(r.dir(), kafkalog.FileName(3, kafkalog.LogSuffix)))
	writeSegment(t, r.dir(), 3, seq(3, 3), same(r.now.UnixMilli(), 3), 10)
	writeSegment(t, r.dir(), 6, nil, nil, 0)
	r.sync()
	fin, _ = r.store.FinishedSegments(r.tp)
	if data, err := r.mgr.FetchIndex(context.Background(), fin[1], remotelog.ProducerSnapshot); err != nil || string(data) != "snapshot" {
		t.Fatalf("snapshot: %q %v", data, err)
	}
	if data, err := r.mgr.FetchIndex(context.Background(), fin[1], remotelog.TransactionIndex); err != nil || len(data) != 34 {
		t.Fatalf("txnindex: %d %v", len(data), err)
	}
}

// Case 7: one record ten years ahead inside an old, copied segment does not
// keep its local copy past local.retention.ms (the file time is used), nor
// the remote copy past retention.ms (the copy time is used).
func TestCaseFutureTimestamp(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.RetentionMs = ptr(2 * 3600 * 1000)
	cfg.Retention.LocalRetentionMs = ptr(3600 * 1000)
	r := newRig(t, cfg, nil)
	old := r.now.Add(-3 * time.Hour)
	future := r.now.AddDate(10, 0, 0).UnixMilli()
	writeSegment(t, r.dir(), 0, seq(0, 3), []int64{old.UnixMilli(), future, old.UnixMilli()}, 10)
	os.Chtimes(filepath.Join(r.dir(), kafkalog.FileName(0, kafkalog.LogSuffix)), old, old)
	writeSegment(t, r.dir(), 3, nil, nil, 0)
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{3}) {
		t.Fatalf("local copy kept by a future timestamp: %v", got)
	}
	if r.offsets().LogStartOffset != 0 || testutilCounter(t, r.c.m.futureTS) != 1 {
		t.Fatalf("remote deleted too early, or no warning: %+v", r.offsets())
	}
	r.now = r.now.Add(2*time.Hour + time.Minute) // copy time + retention.ms
	r.sync()
	if r.offsets().LogStartOffset != 3 {
		t.Fatalf("remote copy kept by a future timestamp: %+v", r.offsets())
	}
}

// Case 8: local.retention.bytes=-2 with retention.bytes=1000 and five
// copied 300-byte segments leaves two deleted locally; local.retention.ms
// above retention.ms is clamped to it.
func TestCaseLocalBytesAndClamp(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.BrokerOwned = yes(false)
	cfg.Retention.RetentionBytes = ptr(1000)
	cfg.Retention.RetentionMs = ptr(-1)
	r := newRig(t, cfg, nil)
	for i := int64(0); i < 5; i++ {
		if n := writeSegment(t, r.dir(), i, []int64{i}, []int64{r.now.UnixMilli()}, 230); n != 300 {
			t.Fatalf("segment of %d bytes", n)
		}
	}
	writeSegment(t, r.dir(), 5, nil, nil, 0)
	// Copy first with remote retention unreachable, to look at local alone.
	r.c.cfg.Retention.RetentionBytes = ptr(-1)
	r.sync()
	r.c.cfg.Retention.RetentionBytes = ptr(1000)
	p := &partition{tp: r.tp, dir: r.dir()}
	p.segs, _ = listSegments(r.dir())
	p.limits = r.c.cfg.resolve("orders", nil).Limits
	if err := r.c.localRetention(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{2, 3, 4, 5}) {
		t.Fatalf("local %v, want two deleted", got)
	}
	// Clamp: local.retention.ms 10h with retention.ms 2h acts as 2h.
	cfg2 := DefaultConfig()
	cfg2.FileDeleteDelayMs = 0
	cfg2.Retention.RetentionMs = ptr(2 * 3600 * 1000)
	cfg2.Retention.LocalRetentionMs = ptr(10 * 3600 * 1000)
	r2 := newRig(t, cfg2, nil)
	writeSegment(t, r2.dir(), 0, []int64{0}, []int64{r2.now.Add(-3 * time.Hour).UnixMilli()}, 10)
	writeSegment(t, r2.dir(), 1, nil, nil, 0)
	r2.sync()
	if got := r2.localBases(); !reflect.DeepEqual(got, []int64{1}) || r2.offsets().LogStartOffset != 1 {
		t.Fatalf("clamped local.retention.ms: local %v offsets %+v", got, r2.offsets())
	}
}

// Case 9 (copier half): a compacted segment whose surviving offsets are 3,
// 50, 99 followed by a segment at 100 tiers both: continuity is judged by
// segment ranges, not surviving offsets.
func TestCaseCompactedContinuity(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	ts := r.now.UnixMilli()
	writeSegment(t, r.dir(), 0, []int64{3, 50, 99}, same(ts, 3), 10)
	writeSegment(t, r.dir(), 100, seq(100, 5), same(ts, 5), 10)
	writeSegment(t, r.dir(), 105, nil, nil, 0)
	if n := r.sync(); n != 2 {
		t.Fatalf("copied %d", n)
	}
	fin, _ := r.store.FinishedSegments(r.tp)
	if fin[0].StartOffset != 0 || fin[0].EndOffset != 99 || fin[1].StartOffset != 100 || r.offsets().HighestTieredOffset != 104 {
		t.Fatalf("rows %+v", fin)
	}
	if testutilCounter(t, r.c.m.gaps) != 0 {
		t.Fatal("compaction gaps reported as lost offsets")
	}
}
