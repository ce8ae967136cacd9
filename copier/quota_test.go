package copier

import (
	"path/filepath"
	"testing"
	"time"
)

// TestCopyQuota copies 6 MiB from two partitions at once under a 2 MiB/s
// copy quota (remote.log.manager.copy.max.bytes.per.second): about three
// seconds, and the bytes copied over the time taken stay at the limit for
// both partitions together.
func TestCopyQuota(t *testing.T) {
	const limit = 2 << 20
	cfg := DefaultConfig()
	cfg.CopyMaxBytesPerSecond = limit
	r := newRig(t, cfg, nil)
	var total int64
	for _, p := range []string{"orders-0", "orders-1"} {
		dir := filepath.Join(r.logDir, p)
		for i := range int64(2) {
			total += writeSegment(t, dir, i*24, seq(i*24, 24), same(r.now.UnixMilli(), 24), 64<<10)
		}
		writeSegment(t, dir, 48, nil, nil, 0)
	}
	start := time.Now()
	if n := r.sync(); n != 4 {
		t.Fatalf("copied %d segments, want 4", n)
	}
	rate := float64(total) / time.Since(start).Seconds()
	ratio := rate / limit
	t.Logf("copied %d bytes at %.0f bytes/s: %.3f of the limit; waited %s in all", total, rate, ratio, r.c.copyQuota.Waited())
	if ratio < 0.8 || ratio > 1.2 {
		t.Fatalf("copy rate %.0f bytes/s is %.2fx the quota %d; want 0.8-1.2x", rate, ratio, limit)
	}
}
