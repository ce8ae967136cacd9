package copier

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/saturate"
)

// hugeMs are millisecond settings a time.Duration cannot hold: Kafka's
// Long.MAX_VALUE ("forever") and values just past MaxInt64/1e6, the first
// that wrap when multiplied by time.Millisecond.
var hugeMs = []int64{math.MaxInt64, math.MaxInt64/1_000_000 + 1, math.MaxInt64/1_000_000 + 1000, math.MaxInt64 / 1000}

// A whole-partition deletion scheduled with remote.log.delete.delay.ms of
// Long.MAX_VALUE (or anything a Duration cannot hold) never comes due: not
// at once (the wrap to -1 ms that deleted copies 26 ms after scheduling),
// not two centuries later.
func TestForeverRemoteLogDeleteDelay(t *testing.T) {
	for _, delay := range hugeMs {
		fc := newFakeCluster()
		fc.set("orders", idA, 1, 5, nil)
		r := clusterRig(t, fc)
		r.c.cfg.RemoteLogDeleteDelayMs = delay
		objs := tieredTwo(t, r, idA)
		fc.remove("orders")
		os.RemoveAll(r.dir())
		r.sync()
		ds, _ := r.store.Deletions(nil)
		if len(ds) != 1 || ds[0].DueMs != math.MaxInt64 || ds[0].Due(r.now.UnixMilli()) {
			t.Fatalf("delay %d: deletions %+v, want one due never", delay, ds)
		}
		if s := ds[0].String(); !strings.Contains(s, "due never") {
			t.Errorf("delay %d: %q does not say it is never due", delay, s)
		}
		r.now = r.now.AddDate(200, 0, 0)
		r.sync()
		if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
			t.Fatalf("delay %d: copies deleted: %d objects left of %d", delay, len(got), len(objs))
		}
		if j := r.journal(); !reflect.DeepEqual(j, []string{"scheduled"}) {
			t.Fatalf("delay %d: journal %v", delay, j)
		}
	}
}

// The largest delay a Duration holds still schedules in the future, not
// in the past.
func TestLongRemoteLogDeleteDelayNoWrap(t *testing.T) {
	c := DefaultConfig()
	now := time.UnixMilli(1_700_000_000_000).UnixMilli()
	for _, d := range []int64{saturate.MaxMillis - 1, saturate.MaxMillis, math.MaxInt64 - now, math.MaxInt64 - now + 1} {
		c.RemoteLogDeleteDelayMs = d
		if due := c.deleteDueMs(now); due <= now {
			t.Errorf("delay %d ms: due %d is not after now %d", d, due, now)
		}
	}
	c.RemoteLogDeleteDelayMs = 0
	if due := c.deleteDueMs(now); due != now {
		t.Errorf("delay 0: due %d, want now %d", due, now)
	}
}

// retention.ms and local.retention.ms of Long.MAX_VALUE (or anything a
// Duration cannot hold) keep every segment, locally and remotely, however
// old; the same rig with an hour's retention deletes, so the assertion
// can fail.
func TestForeverRetentionKeepsSegments(t *testing.T) {
	run := func(ms int64) (local []int64, off remotelog.PartitionOffsets, states map[remotelog.SegmentState]int) {
		cfg := DefaultConfig()
		cfg.FileDeleteDelayMs = 0
		cfg.Retention.RetentionMs, cfg.Retention.LocalRetentionMs = ptr(ms), ptr(ms)
		r := newRig(t, cfg, nil)
		// Segments from 1970 (timestamp 1 ms) and five hours ago.
		writeSegment(t, r.dir(), 0, seq(0, 10), same(1, 10), 10)
		for i := int64(1); i < 5; i++ {
			writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(r.now.Add(time.Duration(i-5)*time.Hour).UnixMilli(), 10), 10)
		}
		writeSegment(t, r.dir(), 50, nil, nil, 0)
		r.sync()
		r.now = r.now.AddDate(100, 0, 0)
		r.sync()
		r.sync()
		return r.localBases(), r.offsets(), r.states()
	}
	for _, ms := range hugeMs {
		local, off, st := run(ms)
		if len(local) != 6 || off.LogStartOffset != 0 || off.LocalLogStartOffset != 0 || st[remotelog.DeleteSegmentFinished] != 0 {
			t.Fatalf("retention.ms=local.retention.ms=%d: local %v, offsets %+v, states %v: something was deleted", ms, local, off, st)
		}
		if st[remotelog.CopySegmentFinished] != 5 {
			t.Fatalf("retention %d: states %v, want five copies", ms, st)
		}
	}
	if local, off, _ := run(3600_000); len(local) != 1 || off.LogStartOffset != 50 {
		t.Fatalf("an hour's retention kept local %v, offsets %+v", local, off)
	}
}

// file.delete.delay.ms of Long.MAX_VALUE keeps ".deleted" files (it used
// to wrap to -1 ms, so they went at once); 0 removes them.
func TestForeverFileDeleteDelay(t *testing.T) {
	for _, delay := range append([]int64{0}, hugeMs...) {
		cfg := DefaultConfig()
		cfg.FileDeleteDelayMs = delay
		cfg.Retention.LocalRetentionMs = ptr(int64(3600_000))
		r := newRig(t, cfg, nil)
		fiveSegments(t, r) // ages 5h .. 1h: all but the last past an hour
		r.sync()
		r.sync()
		deleted, _ := filepath.Glob(filepath.Join(r.dir(), "*"+kafkalog.DeletedSuffix))
		if delay == 0 && len(deleted) != 0 {
			t.Fatalf("file.delete.delay.ms 0 kept %v", deleted)
		}
		if delay != 0 && len(deleted) == 0 {
			t.Fatalf("file.delete.delay.ms %d: the .deleted files are gone", delay)
		}
	}
}

// remote.log.manager.task.interval.ms beyond what a Duration holds is
// refused by Validate, saying the maximum; Interval never wraps to a
// non-positive duration (NewTicker panics on one), and Run starts with
// the largest accepted interval.
func TestHugeTaskInterval(t *testing.T) {
	for _, ms := range hugeMs {
		c := DefaultConfig()
		c.LogDirs, c.TaskIntervalMs = []string{"/kafka"}, ms
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "remote.log.manager.task.interval.ms") || !strings.Contains(err.Error(), "at most 9223372036854 ms") {
			t.Errorf("interval %d: Validate: %v", ms, err)
		}
		if d := c.Interval(); d <= 0 {
			t.Errorf("interval %d: Interval() = %v", ms, d)
		}
	}
	cfg := DefaultConfig()
	cfg.TaskIntervalMs = saturate.MaxMillis
	r := newRig(t, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.c.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// Settings that size goroutine pools and allocations are bounded.
func TestPoolSettingsBounded(t *testing.T) {
	c := DefaultConfig()
	c.LogDirs, c.BrokerID = []string{"/kafka"}, 1
	c.CopierThreadPoolSize, c.CopyChecksPerPass = math.MaxInt64, math.MaxInt64
	err := c.Validate()
	for _, want := range []string{"remote.log.manager.copier.thread.pool.size 9223372036854775807 is out of range (from 1 to 1024",
		"copy_checks_per_pass 9223372036854775807 is out of range (from 0 to 100000"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
	c.CopierThreadPoolSize, c.CopyChecksPerPass = MaxCopierThreadPoolSize, MaxCopyChecksPerPass
	if err := c.Validate(); err != nil {
		t.Errorf("the maxima refused: %v", err)
	}
}
