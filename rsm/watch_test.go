package rsm_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// downBucket fails every Attributes call while down.
type downBucket struct {
	rsm.Bucket
	down   atomic.Bool
	probes atomic.Int64
}

func (b *downBucket) Attributes(ctx context.Context, key string) (rsm.ObjectAttributes, error) {
	if strings.HasSuffix(key, "_tierd_probe") {
		b.probes.Add(1)
	}
	if b.down.Load() {
		return rsm.ObjectAttributes{}, errors.New("dial tcp 127.0.0.1:9000: connect: connection refused")
	}
	return b.Bucket.Attributes(ctx, key)
}

// A failed request through the watched bucket makes the watch probe at
// once, not after its (hour-long) interval; a missing object does not.
func TestWatchProbesOnErrors(t *testing.T) {
	b := &downBucket{Bucket: memory.New()}
	w := rsm.NewWatch(b, "pre", time.Hour, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	wb := w.Wrap(b)

	if _, err := wb.Attributes(ctx, "pre/missing"); !errors.Is(err, rsm.ErrNotFound) {
		t.Fatal(err)
	}
	b.down.Store(true)
	// A not-found asked for no probe: the watch still says up.
	if ok, why := w.Ready(); !ok || w.Err() != nil || b.probes.Load() != 1 {
		t.Fatalf("after a not-found: ready %v %q, %d probes", ok, why, b.probes.Load())
	}
	if _, err := wb.Attributes(ctx, "pre/x"); err == nil {
		t.Fatal("down bucket answered")
	}
	testtools.WaitFor(t, "a probe after a failed request", func() bool { return w.Err() != nil })
	if ok, why := w.Ready(); ok || !strings.Contains(why, "object store unreachable: memory") || !strings.Contains(why, "connection refused") {
		t.Fatalf("Ready() = %v, %q", ok, why)
	}
	b.down.Store(false)
	wb.Attributes(ctx, "pre/x") // not found now: asks for nothing
	w.Kick()
	testtools.WaitFor(t, "a probe after a kick", func() bool { return w.Err() == nil })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
