package copier

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// waitRig is a new metadata dir (created now) over old data: three
// rolled segments ten days old and an active one, retention.ms one day,
// local.retention.ms 0, file.delete.delay.ms 0: without the wait, the
// first pass copies all three and deletes them locally and remotely.
func waitRig(t *testing.T, delay time.Duration) (*rig, *logRecorder, int64) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs, cfg.InitialRetentionDelay = 0, delay
	cfg.Retention.RetentionMs, cfg.Retention.LocalRetentionMs = ptr(86_400_000), ptr(0)
	r := newRig(t, cfg, nil)
	r.c.cfg.MetadataCreatedMs = r.now.UnixMilli()
	logs, _ := r.observe()
	old := r.now.Add(-240 * time.Hour).UnixMilli()
	var bytes int64
	for i := int64(0); i < 3; i++ {
		bytes += writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(old, 10), 10)
	}
	writeSegment(t, r.dir(), 30, nil, nil, 0)
	return r, logs, bytes
}

// TestInitialRetentionDelay: on a new metadata dir, the first passes
// copy but delete nothing past retention, locally or remotely, for
// initial_retention_delay, and say what will go (log: partition, tier,
// offsets, bytes, once per change; the partition's status). Once the
// delay is over, retention deletes as it always does.
func TestInitialRetentionDelay(t *testing.T) {
	r, logs, bytes := waitRig(t, 24*time.Hour)
	created := r.now
	if n := r.sync(); n != 3 {
		t.Fatalf("copied %d, want 3", n)
	}
	kept := func(when string) {
		t.Helper()
		if got := r.localBases(); !reflect.DeepEqual(got, []int64{0, 10, 20, 30}) {
			t.Fatalf("%s: local segments %v, want all kept", when, got)
		}
		if st := r.states(); st[remotelog.CopySegmentFinished] != 3 || st[remotelog.DeleteSegmentStarted]+st[remotelog.DeleteSegmentFinished] != 0 {
			t.Fatalf("%s: rows %v, want 3 finished copies", when, st)
		}
		if off := r.offsets(); off.LogStartOffset != 0 {
			t.Fatalf("%s: log start offset moved to %d", when, off.LogStartOffset)
		}
	}
	kept("first pass")
	recs := logs.with("retention waits for initial_retention_delay")
	if len(recs) != 2 {
		t.Fatalf("logged %d waits, want local and remote: %+v", len(recs), recs)
	}
	until := created.Add(24 * time.Hour).UTC().Format(time.RFC3339)
	for _, rec := range recs {
		want := map[string]string{"partition": "orders-0", "segments": "3", "base_offset": "0", "end_offset": "29",
			"bytes": fmt.Sprint(bytes), "until": until}
		for k, v := range want {
			if rec.attrs[k] != v {
				t.Errorf("%s wait logged %s=%q, want %q", rec.attrs["tier"], k, rec.attrs[k], v)
			}
		}
	}
	d := r.status(r.tp).Detail
	for _, want := range []string{"retention waits until " + until, fmt.Sprintf("3 local segments, offsets 0-29, %d bytes", bytes),
		fmt.Sprintf("3 remote copies, offsets 0-29, %d bytes", bytes)} {
		if !strings.Contains(d, want) {
			t.Errorf("status detail %q lacks %q", d, want)
		}
	}

	r.now = created.Add(23 * time.Hour)
	r.sync()
	kept("23 hours on")
	if n := len(logs.with("retention waits for initial_retention_delay")); n != 2 {
		t.Errorf("the same waits logged again: %d lines", n)
	}

	r.now = created.Add(24 * time.Hour)
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{30}) {
		t.Fatalf("delay over: local segments %v, want only the active one", got)
	}
	if st := r.states(); st[remotelog.DeleteSegmentFinished] != 3 {
		t.Fatalf("delay over: rows %v, want the 3 copies deleted", st)
	}
	if len(logs.with("initial_retention_delay is over")) != 1 {
		t.Error("the end of the delay was not logged")
	}
	if d := r.status(r.tp).Detail; strings.Contains(d, "retention waits") {
		t.Errorf("status still says it waits: %q", d)
	}
}

// TestInitialRetentionGoAhead: initial_retention_delay 0 (a reload
// applies it) lets retention go ahead at the next pass, and a metadata
// dir not new (MetadataCreatedMs 0) never waits.
func TestInitialRetentionGoAhead(t *testing.T) {
	r, _, _ := waitRig(t, 24*time.Hour)
	r.sync()
	if got := r.localBases(); len(got) != 4 {
		t.Fatalf("local segments %v, want all kept while waiting", got)
	}
	next := r.c.cfg
	next.InitialRetentionDelay = 0
	if err := r.c.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{30}) {
		t.Fatalf("after initial_retention_delay: 0, local segments %v", got)
	}
	if st := r.states(); st[remotelog.DeleteSegmentFinished] != 3 {
		t.Fatalf("after initial_retention_delay: 0, rows %v", st)
	}

	old, _, _ := waitRig(t, 24*time.Hour)
	old.c.cfg.MetadataCreatedMs = 0
	old.sync()
	if got := old.localBases(); !reflect.DeepEqual(got, []int64{30}) {
		t.Fatalf("metadata dir not new: local segments %v", got)
	}
}
