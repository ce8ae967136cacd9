package remoteread

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/testutil/readtest"
)

// A random read landing exactly where a sequential reader's last fetch
// ended takes over that reader's chain (its read-ahead state): its own
// read-ahead starts from where it ended, which is where the sequential
// reader, right behind it, reads next. The sequential reader starts a new
// chain and gets read-ahead again after minHops fetches. Nothing is
// fetched twice and no prefetched byte goes unread: a sequential reader
// of the whole log, with such a read landing on its end every 10
// fetches, fetches from the store no more bytes than the log holds.
func TestRandomReadOnChainEndWastesNothing(t *testing.T) {
	const logBytes = 600 * 5070 // referenceLog: 600 batches of 5070 bytes
	for _, landing := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		cfg := DefaultConfig()
		cfg.Cache.ChunkBytes = 64 << 10
		cfg.PrefetchBytes = 256 << 10
		cfg.MaxWaitMs = 600000
		e := newEnv(t, cfg, WithRegisterer(reg))
		readtest.ReferenceLog(t, e.Rig)
		ctx := context.Background()
		landings := 0
		for next, i := int64(0), 0; next <= 599; i++ {
			if landing && i%10 == 9 {
				if _, err := e.eng.ReadRemote(ctx, e.TP, next, 1); err != nil {
					t.Fatal(err)
				}
				landings++
			}
			rr, err := e.eng.ReadRemote(ctx, e.TP, next, 20000)
			if err != nil {
				t.Fatal(err)
			}
			next = rr.Next
		}
		e.eng.Settle()
		fetched, served := readtest.SumMetric(t, reg, "tierd_fetch_log_bytes_total"), readtest.SumMetric(t, reg, "tierd_fetch_served_bytes_total")
		wasted, prefetches := readtest.SumMetric(t, reg, "tierd_cache_prefetch_wasted_bytes_total"), readtest.SumMetric(t, reg, "tierd_cache_prefetches_total")
		t.Logf("landings %d: fetched %.0f, served %.0f, prefetches %.0f, wasted %.0f", landings, fetched, served, prefetches, wasted)
		if fetched > logBytes || wasted != 0 || prefetches == 0 {
			t.Errorf("%d random reads on the reader's end: fetched %.0f bytes of a %d-byte log, %.0f prefetched and unread, %.0f prefetches; want at most the log, none unread, some",
				landings, fetched, logBytes, wasted, prefetches)
		}
	}
}
