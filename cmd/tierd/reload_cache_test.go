package main

import "testing"

// TestReloadChunkCacheBudgets: the chunk cache's memory budget is dynamic;
// its disk budget is dynamic while the disk tier stays on, and a change
// turning the tier on or off is refused (restart needed) and keeps the
// running value; the chunk size stays static. The task interval is static
// as in Kafka (remote.log.manager.task.interval.ms is not among Kafka's
// dynamic broker configs), the copier pool dynamic (KIP-1105).
func TestReloadChunkCacheBudgets(t *testing.T) {
	running := defaultConfig()
	running.Fetch.Cache.DiskDir, running.Fetch.Cache.DiskBytes = t.TempDir(), 1<<30
	kinds := func(next config) map[string]string {
		dyn, static := diff(running, next)
		out := map[string]string{}
		for _, c := range dyn {
			out[c.Key] = "dynamic"
		}
		for _, c := range static {
			out[c.Key] = "static"
		}
		return out
	}
	next := running
	next.Fetch.Cache.MemoryBytes, next.Fetch.Cache.DiskBytes, next.Fetch.Cache.ChunkBytes = 64<<20, 1<<29, 1<<20
	next.Copier.TaskIntervalMs, next.Copier.CopierThreadPoolSize = 1000, 3
	got := kinds(next)
	for key, want := range map[string]string{
		"fetch.remote.fetch.chunk.cache.memory.bytes": "dynamic",
		diskBudgetKey:                                       "dynamic",
		"fetch.remote.fetch.chunk.bytes":                    "static",
		"copier.remote.log.manager.task.interval.ms":        "static",
		"copier.remote.log.manager.copier.thread.pool.size": "dynamic",
	} {
		if got[key] != want {
			t.Errorf("%s: %q, want %s (all: %v)", key, got[key], want, got)
		}
	}
	merged := running.withDynamic(next)
	if merged.Fetch.Cache.MemoryBytes != 64<<20 || merged.Fetch.Cache.DiskBytes != 1<<29 || merged.Fetch.Cache.ChunkBytes != running.Fetch.Cache.ChunkBytes {
		t.Errorf("merged cache config %+v", merged.Fetch.Cache)
	}
	if memoryLimit(merged) >= memoryLimit(running) {
		t.Errorf("a smaller memory budget left the memory limit at %d (was %d)", memoryLimit(merged), memoryLimit(running))
	}

	off := running
	off.Fetch.Cache.DiskBytes = 0
	if k := kinds(off)[diskBudgetKey]; k != "static" {
		t.Errorf("turning the disk tier off: %q, want static", k)
	}
	if m := running.withDynamic(off); m.Fetch.Cache.DiskBytes != running.Fetch.Cache.DiskBytes {
		t.Errorf("turning the disk tier off carried over: %d", m.Fetch.Cache.DiskBytes)
	}
	noDisk := defaultConfig()
	on := noDisk
	on.Fetch.Cache.DiskDir, on.Fetch.Cache.DiskBytes = t.TempDir(), 1<<30
	dyn, _ := diff(noDisk, on)
	for _, c := range dyn {
		if c.Key == diskBudgetKey {
			t.Errorf("turning the disk tier on called dynamic")
		}
	}
}
