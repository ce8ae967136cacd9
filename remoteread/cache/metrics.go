package cache

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	hits, prefetchSkipped, prefetchWasted       *prometheus.CounterVec
	misses, loadedBytes, diskErrors, prefetches prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		hits:            f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_cache_hits_total", Help: "Chunk reads served without a new GET, by tier (memory, disk, or a load already in flight)."}, []string{"tier"}),
		misses:          f.NewCounter(prometheus.CounterOpts{Name: "tierd_cache_misses_total", Help: "Chunk reads and prefetches that started a load from the object store."}),
		loadedBytes:     f.NewCounter(prometheus.CounterOpts{Name: "tierd_cache_loaded_bytes_total", Help: "Bytes loaded from the object store into the cache."}),
		diskErrors:      f.NewCounter(prometheus.CounterOpts{Name: "tierd_cache_disk_errors_total", Help: "Chunks that could not be written to the disk tier."}),
		prefetches:      f.NewCounter(prometheus.CounterOpts{Name: "tierd_cache_prefetches_total", Help: "Chunk loads started by prefetch (admitted)."}),
		prefetchSkipped: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_cache_prefetch_skipped_total", Help: "Prefetches refused by admission control, by the resource that had no room (budget: the shared prefetch budget, gets: GET slots, memory: the memory budget, crowded: more active sequential readers than the memory budget holds chunks for)."}, []string{"reason"}),
		prefetchWasted: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_cache_prefetch_wasted_bytes_total",
			Help: "Prefetched bytes no read used, by why they left the prefetch budget (evicted, expired: unread while the cache loaded a memory budget's worth since its reader last read, failed)."}, []string{"reason"}),
	}
	for _, r := range []string{"budget", "gets", "memory", "crowded"} {
		m.prefetchSkipped.WithLabelValues(r)
	}
	for _, r := range []string{"evicted", "expired", "failed"} {
		m.prefetchWasted.WithLabelValues(r)
	}
	for _, t := range []string{"memory", "disk", "inflight"} {
		m.hits.WithLabelValues(t)
	}
	return m
}
