package copier

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// fiveSegments writes five rolled segments of equal size (and an empty
// active one) with timestamps an hour apart, oldest first, and returns the
// size of each.
func fiveSegments(t *testing.T, r *rig) int64 {
	var size int64
	for i := int64(0); i < 5; i++ {
		ts := r.now.Add(time.Duration(i-5) * time.Hour).UnixMilli()
		size = writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(ts, 10), 10)
	}
	writeSegment(t, r.dir(), 50, nil, nil, 0)
	return size
}

// TestLocalSizeRetention: local.retention.bytes=-2 follows retention.bytes;
// the oldest copied segments go until the local log fits.
func TestLocalSizeRetention(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	r := newRig(t, cfg, nil)
	size := fiveSegments(t, r)
	// Room for three and a half segments: two must go locally.
	r.c.cfg.Retention.RetentionBytes = ptr(3*size + size/2)
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{20, 30, 40, 50}) {
		t.Fatalf("local segments %v, want two deleted", got)
	}
	// The whole log (local + remote below the local start) is 5 segments,
	// 1.5 over retention.bytes: remote retention drops the oldest copy
	// (the log keeps 4, at least the limit) and not the second, which would
	// cut the log to 3, below the limit (Kafka's RemoteLogManager rule);
	// the log start offset moves first.
	r.sync()
	off := r.offsets()
	if off.LogStartOffset != 10 || off.LocalLogStartOffset != 20 {
		t.Fatalf("offsets %+v", off)
	}
	if st := r.states(); st[remotelog.DeleteSegmentFinished] != 1 || st[remotelog.CopySegmentFinished] != 4 {
		t.Fatalf("states %v", st)
	}
}

// TestRemoteSizeRetentionBoundary: a remote copy goes by retention.bytes
// only while the log without it still holds at least retention.bytes;
// exactly at the limit it goes, one byte short it stays.
func TestRemoteSizeRetentionBoundary(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   func(size int64) int64
		deleted int
	}{
		{"log without the oldest exactly at the limit", func(size int64) int64 { return 4 * size }, 1},
		{"log without the oldest one byte short", func(size int64) int64 { return 4*size + 1 }, 0},
		{"two fit exactly", func(size int64) int64 { return 3 * size }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.FileDeleteDelayMs = 0
			cfg.Retention.LocalRetentionBytes = ptr(0)
			r := newRig(t, cfg, nil)
			size := fiveSegments(t, r)
			r.sync() // copy all five, and delete them locally
			r.c.cfg.Retention.RetentionBytes = ptr(tc.limit(size))
			r.sync()
			if st := r.states(); st[remotelog.DeleteSegmentFinished] != tc.deleted || st[remotelog.CopySegmentFinished] != 5-tc.deleted {
				t.Fatalf("states %v, want %d deleted", st, tc.deleted)
			}
			if off := r.offsets(); off.LogStartOffset != int64(10*tc.deleted) {
				t.Fatalf("offsets %+v, want log start %d", off, 10*tc.deleted)
			}
		})
	}
}

// TestRemoteTimeRetention: remote copies older than retention.ms go, oldest
// first, with the log start offset moved before the objects are deleted;
// the local copy of a segment below the new log start offset goes too.
func TestRemoteTimeRetention(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.RetentionMs = ptr(int64(150 * time.Minute / time.Millisecond))
	cfg.Retention.LocalRetentionMs = ptr(int64(150 * time.Minute / time.Millisecond))
	r := newRig(t, cfg, nil)
	fiveSegments(t, r) // ages 5h, 4h, 3h, 2h, 1h
	r.sync()
	if off := r.offsets(); off.LogStartOffset != 30 || off.HighestTieredOffset != 49 || off.LocalLogStartOffset != 30 {
		t.Fatalf("offsets %+v", off)
	}
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{30, 40, 50}) {
		t.Fatalf("local %v", got)
	}
	for _, k := range r.objects() {
		if strings.Contains(k, "/00000000000000000000-") || strings.Contains(k, "/00000000000000000010-") {
			t.Fatalf("object of a deleted segment left: %s", k)
		}
	}
	r.now = r.now.Add(time.Hour)
	r.sync()
	if off := r.offsets(); off.LogStartOffset != 40 {
		t.Fatalf("after an hour: %+v", off)
	}
}

// TestLogStartOffsetFromBroker: a log-start-offset-checkpoint (e.g. after
// DeleteRecords) moves the log start offset, and remote copies wholly below
// it are deleted.
func TestLogStartOffsetFromBroker(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BrokerOwned = yes(true)
	r := newRig(t, cfg, nil)
	fiveSegments(t, r)
	r.sync()
	writeFile(t, r.logDir+"/log-start-offset-checkpoint", "0\n1\norders 0 25\n")
	r.sync()
	if off := r.offsets(); off.LogStartOffset != 25 {
		t.Fatalf("offsets %+v", off)
	}
	if st := r.states(); st[remotelog.DeleteSegmentFinished] != 2 || st[remotelog.CopySegmentFinished] != 3 {
		t.Fatalf("states %v", st)
	}
	if got := r.localBases(); len(got) != 6 {
		t.Fatalf("broker-owned local files touched: %v", got)
	}
}

// A log-start-offset-checkpoint past what the log can hold (beyond the
// high watermark, or without one beyond the active segment) is ignored:
// it would delete every copy and never-copied local data.
func TestImplausibleBrokerLogStartOffset(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	r := newRig(t, cfg, nil)
	fiveSegments(t, r)
	r.sync()
	objs := r.sortedObjects()
	writeFile(t, r.logDir+"/log-start-offset-checkpoint", "0\n1\norders 0 5000\n")
	r.sync()
	writeFile(t, r.logDir+"/replication-offset-checkpoint", "0\n1\norders 0 30\n")
	writeFile(t, r.logDir+"/log-start-offset-checkpoint", "0\n1\norders 0 99999\n")
	r.sync()
	if off := r.offsets(); off.LogStartOffset != 0 {
		t.Fatalf("offsets %+v", off)
	}
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("copies deleted on an implausible log start offset")
	}
	if got := r.localBases(); len(got) != 6 {
		t.Fatalf("local segments deleted: %v", got)
	}
}
