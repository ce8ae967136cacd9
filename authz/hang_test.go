package authz

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// hangingSource answers its first read, then never again: each later
// read waits until its context ends.
type hangingSource struct{ reads atomic.Int32 }

func (h *hangingSource) ACLs(ctx context.Context) ([]kafkaacl.ACL, string, error) {
	if h.reads.Add(1) == 1 {
		return []kafkaacl.ACL{aliceReadsOrders}, "hang", nil
	}
	<-ctx.Done()
	return nil, "hang", ctx.Err()
}

// TestHangingReadGoesStale: a read that never returns (a cluster that
// takes the connection and answers nothing) is a read that failed: it is
// given up after refresh_interval, so the ACLs last read go stale at
// max_stale as with any failed read, rather than deciding for ever.
func TestHangingReadGoesStale(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Unix(1_800_000_000, 0).UnixNano())
	cfg := DefaultConfig()
	cfg.RefreshInterval, cfg.MaxStale = time.Second, time.Second
	src := &hangingSource{}
	a, err := New(cfg, src, WithClock(func() time.Time { return time.Unix(0, now.Load()) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Load(context.Background()); err != nil || !aliceReads(a).Allowed {
		t.Fatalf("first read: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Load(ctx) }() // hangs, until given up
	now.Add(int64(time.Hour))
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a hanging read succeeded")
		}
	case <-time.After(20 * time.Second):
		cancel()
		<-done
		t.Fatal("a hanging read was never given up")
	}
	if d := aliceReads(a); d.Allowed || d.Rule != RuleStale {
		t.Errorf("an hour after the last read, with the read hanging: %+v", d)
	}
}
