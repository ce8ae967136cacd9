package copier

import (
	"context"
	"errors"
	"testing"
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
