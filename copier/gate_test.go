package copier

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/memory"
)

// While the gate says no, a pass copies and deletes nothing and returns
// the gate's reason; once it says yes, the next pass copies.
func TestGateHoldsPasses(t *testing.T) {
	cfg := DefaultConfig()
	r := newRig(t, cfg, nil)
	down := errors.New("metadata dir /x is full")
	var gate error = down
	WithGate(func() error { return gate })(r.c)
	ts := r.now.UnixMilli()
	for i := int64(0); i < 3; i++ {
		writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(ts, 10), 100)
	}
	n, err := r.c.Sync(context.Background())
	if n != 0 || !errors.Is(err, down) {
		t.Fatalf("gated pass: copied %d, err %v; want 0 and the gate's reason", n, err)
	}
	if objs := r.objects(); len(objs) != 0 {
		t.Fatalf("gated pass wrote %v", objs)
	}
	gate = nil
	if n := r.sync(); n != 2 {
		t.Fatalf("open gate: copied %d, want 2", n)
	}
}

// TestGateStatus: while the gate holds passes, every known partition
// waits for the gate's reason, with its error in the detail, and keeps
// the pending counts of the last pass; a partition the log dirs gained
// meanwhile shows too. An error that is no GateError reads
// store_unreachable when a server did not answer.
func TestGateStatus(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	var gate error
	r.observe(WithGate(func() error { return gate }))
	ts := r.now.UnixMilli()
	var pendingBytes int64
	for i := int64(0); i < 3; i++ {
		size := writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(ts, 10), 100)
		if i > 0 {
			pendingBytes += size
		}
	}
	writeSegment(t, r.dir(), 30, nil, nil, 0)
	writeCheckpoint(t, r.logDir, "orders 0 10") // segments 10 and 20 wait for the high watermark
	r.sync()
	if st := r.status(r.tp); st.Reason != remotelog.WaitHighWatermark || st.PendingSegments != 2 || st.PendingBytes != pendingBytes {
		t.Fatalf("before: %+v", st)
	}
	newTP := remotelog.TopicPartition{Topic: "payments", Partition: 3}
	writeSegment(t, filepath.Join(r.logDir, newTP.String()), 0, nil, nil, 0)
	for _, tc := range []struct {
		gate   error
		reason remotelog.WaitReason
		says   string
	}{
		{&GateError{Reason: remotelog.WaitStoreUnreachable, Err: errors.New("bucket tiered: dial tcp 127.0.0.1:9: connection refused")},
			remotelog.WaitStoreUnreachable, "connection refused"},
		{&GateError{Reason: remotelog.WaitMetadataUnwritable, Err: errors.New("metadata dir /m is full: no space left on device")},
			remotelog.WaitMetadataUnwritable, "metadata dir /m is full"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, remotelog.WaitStoreUnreachable, "connection refused"},
	} {
		gate = tc.gate
		if _, err := r.c.Sync(context.Background()); !errors.Is(err, tc.gate) {
			t.Fatalf("gated pass: %v", err)
		}
		st := r.status(r.tp)
		if st.State != remotelog.TierWaiting || st.Reason != tc.reason || !strings.Contains(st.Detail, tc.says) || st.Error == "" ||
			st.PendingSegments != 2 || st.PendingBytes != pendingBytes || st.RemoteSegments != 1 {
			t.Errorf("gate %v: %+v", tc.gate, st)
		}
		if st := r.status(newTP); st.State != remotelog.TierWaiting || st.Reason != tc.reason {
			t.Errorf("gate %v: a partition new in the log dirs: %+v", tc.gate, st)
		}
		if _, reasons := r.c.Status().Counts(); reasons[tc.reason] != 2 {
			t.Errorf("gate %v: counts %v", tc.gate, reasons)
		}
	}
	gate = nil
	r.sync()
	if st := r.status(r.tp); st.Reason != remotelog.WaitHighWatermark || st.Error != "" {
		t.Fatalf("after the gate opened: %+v", st)
	}
}

// TestCopyFailsWhileStoreDown: a copy that fails while the gate says the
// object store is down reads store_unreachable with the probe's error,
// whatever the copy's own error looks like; with the store up, the same
// failure reads copy_failed.
func TestCopyFailsWhileStoreDown(t *testing.T) {
	fb := &faultBucket{Bucket: memory.New(), failOn: "/", fails: 1 << 30}
	r := newRig(t, DefaultConfig(), fb)
	probe := errors.New("bucket tiered: probe: 503 Service Unavailable")
	var calls atomic.Int64
	var down atomic.Bool
	r.observe(WithGate(func() error {
		calls.Add(1)
		if down.Load() {
			return &GateError{Reason: remotelog.WaitStoreUnreachable, Err: probe}
		}
		return nil
	}))
	ts := r.now.UnixMilli()
	writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("no error from a failing upload")
	}
	if st := r.status(r.tp); st.Reason != remotelog.WaitCopyFailed || !strings.Contains(st.Detail, "SlowDown") {
		t.Fatalf("store up: %+v", st)
	}
	// The store goes down during the next pass: the gate lets it start,
	// then says down.
	r.c.gate = func() error {
		if calls.Add(1) > 1 {
			return &GateError{Reason: remotelog.WaitStoreUnreachable, Err: probe}
		}
		return nil
	}
	calls.Store(0)
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("no error from a failing upload")
	}
	st := r.status(r.tp)
	if st.Reason != remotelog.WaitStoreUnreachable || !strings.Contains(st.Detail, "503 Service Unavailable") || !strings.Contains(st.Detail, "SlowDown") ||
		st.PendingSegments != 1 {
		t.Fatalf("store down: %+v", st)
	}
}

// TestLastSuccess: tierd_copier_last_success_timestamp_seconds moves for
// a pass that ran with no failing partition, held ones included; not for
// a pass with a failed copy, nor for a pass the gate skipped, nor for a
// pass whose partitions wait because the Kafka cluster does not answer.
func TestLastSuccess(t *testing.T) {
	fb := &faultBucket{Bucket: memory.New(), failOn: "/"}
	r := newRig(t, DefaultConfig(), fb)
	var gate error
	_, reg := r.observe(WithGate(func() error { return gate }))
	last := func() float64 {
		t.Helper()
		v, ok := metricValue(t, reg, "tierd_copier_last_success_timestamp_seconds", nil)
		if !ok {
			t.Fatal("no tierd_copier_last_success_timestamp_seconds")
		}
		return v
	}
	ts := r.now.UnixMilli()
	writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	other := remotelog.TopicPartition{Topic: "orders", Partition: 1}
	otherDir := filepath.Join(r.logDir, other.String())
	writeSegment(t, otherDir, 0, seq(0, 10), same(ts, 10), 100)
	writeSegment(t, otherDir, 10, nil, nil, 0)
	r.sync()
	if got := last(); got != float64(r.now.UnixMilli())/1000 {
		t.Fatalf("after a clean pass: %v", got)
	}

	// orders-1 is held: the pass returns its error and still succeeds.
	writeFile(t, filepath.Join(otherDir, kafkalog.PartitionMetadataFile), "not what a broker writes")
	r.now = r.now.Add(time.Minute)
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("a held partition's pass had no error")
	}
	if st := r.status(other); st.Reason != remotelog.WaitHeld {
		t.Fatalf("orders-1: %+v", st)
	}
	heldPass := float64(r.now.UnixMilli()) / 1000
	if got := last(); got != heldPass {
		t.Fatalf("a pass with only a held partition: last success %v, want %v", got, heldPass)
	}

	// A copy fails: not a success.
	writeSegment(t, r.dir(), 10, seq(10, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 20, nil, nil, 0)
	fb.mu.Lock()
	fb.fails = 1 << 30
	fb.mu.Unlock()
	r.now = r.now.Add(time.Minute)
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("no error from a failing upload")
	}
	if st := r.status(r.tp); st.Reason != remotelog.WaitCopyFailed {
		t.Fatalf("orders-0: %+v", st)
	}
	if got := last(); got != heldPass {
		t.Fatalf("a pass with a failed copy moved the last success to %v", got)
	}

	// Skipped by the gate: not a success either, though nothing failed.
	fb.mu.Lock()
	fb.fails = 0
	fb.mu.Unlock()
	gate = &GateError{Reason: remotelog.WaitMetadataUnwritable, Err: errors.New("metadata dir /m is read-only")}
	r.now = r.now.Add(time.Minute)
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("a skipped pass had no error")
	}
	if got := last(); got != heldPass {
		t.Fatalf("a skipped pass moved the last success to %v", got)
	}
	gate = nil
	r.now = r.now.Add(time.Minute)
	r.c.Sync(context.Background()) // orders-1 is still held
	if got := last(); got != float64(r.now.UnixMilli())/1000 {
		t.Fatalf("after the copy went through: %v", got)
	}

	// A Kafka cluster that does not answer: every partition waits
	// cluster_unreachable, with no error; not a success.
	fc := newFakeCluster()
	fc.set("orders", idA, 1, 6, nil)
	cr := clusterRig(t, fc)
	_, creg := cr.observe(WithCluster(fc))
	topicID(t, cr.dir(), idA)
	writeSegment(t, cr.dir(), 0, seq(0, 10), same(cr.now.UnixMilli(), 10), 100)
	writeSegment(t, cr.dir(), 10, nil, nil, 0)
	clast := func() float64 {
		t.Helper()
		v, _ := metricValue(t, creg, "tierd_copier_last_success_timestamp_seconds", nil)
		return v
	}
	cr.c.Sync(context.Background())
	clean := float64(cr.now.UnixMilli()) / 1000
	if got := clast(); got != clean {
		t.Fatalf("cluster up: last success %v, want %v", got, clean)
	}
	fc.down, cr.c.cs = true, clusterState{}
	cr.now = cr.now.Add(time.Minute)
	cr.c.Sync(context.Background())
	if st := cr.status(cr.tp); st.Reason != remotelog.WaitClusterUnreachable {
		t.Fatalf("cluster down: %+v", st)
	}
	if got := clast(); got != clean {
		t.Fatalf("a pass with every partition waiting cluster_unreachable moved the last success to %v", got)
	}
	fc.down = false
	cr.now = cr.now.Add(time.Minute)
	cr.c.Sync(context.Background())
	if got := clast(); got != float64(cr.now.UnixMilli())/1000 {
		t.Fatalf("cluster back: last success %v", got)
	}
}

// TestGateStatusAtOnce: when the gate turns (the bucket watch finds the
// object store down, the metadata store stops taking writes) between
// passes, Status says so at once, before any pass runs; when it clears,
// the last pass's statuses show again.
func TestGateStatusAtOnce(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	var gate atomic.Pointer[error]
	WithGate(func() error {
		if p := gate.Load(); p != nil {
			return *p
		}
		return nil
	})(r.c)
	ts := r.now.UnixMilli()
	writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	r.sync()
	before := r.status(r.tp)
	if before.State == remotelog.TierWaiting {
		t.Fatalf("before: %+v", before)
	}
	passes := r.c.Status().Passes
	var down error = &GateError{Reason: remotelog.WaitStoreUnreachable, Err: errors.New("bucket tiered: dial tcp 127.0.0.1:9: connection refused")}
	gate.Store(&down)
	st := r.status(r.tp)
	if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitStoreUnreachable || !strings.Contains(st.Detail, "connection refused") || st.Copying != nil {
		t.Fatalf("with the store down, before a pass: %+v", st)
	}
	if got := r.c.Status().Passes; got != passes {
		t.Fatalf("a pass ran: %d passes, want %d", got, passes)
	}
	down = &GateError{Reason: remotelog.WaitMetadataUnwritable, Err: errors.New("metadata dir /m is full")}
	gate.Store(&down)
	if st := r.status(r.tp); st.Reason != remotelog.WaitMetadataUnwritable {
		t.Fatalf("with the metadata dir full: %+v", st)
	}
	gate.Store(nil)
	if st := r.status(r.tp); st.State != before.State || st.Reason != before.Reason {
		t.Fatalf("gate clear: %+v, want %+v", st, before)
	}
}
