package remoteread

import (
	"context"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/quota"
)

// DynamicKeys are the fetch settings a running tierd takes from a reloaded
// tierd.yaml, by yaml key, as Kafka's dynamic remote log configs
// (remote.fetch.max.wait.ms, remote.log.index.file.cache.total.size.bytes
// and the fetch quota are in DynamicRemoteLogConfig.ReconfigurableConfigs
// of Kafka's DynamicBrokerConfig.scala), the chunk cache's memory and disk
// budgets (tierd's; dynamic as the index cache's budget is) and tierd's
// per-request bounds. The listen address and the rest of the chunk cache
// (chunk size, disk dir, GETs in flight, load timeout, prefetch budget)
// need a restart (the prefetch budget in force follows the memory
// budget, at most half of it: see cache.SetBudgets):
// chunks in use are cut to the chunk size. Turning the disk tier on or off
// (its budget to or from 0) needs one too (see DiskBudgetDynamic).
var DynamicKeys = []string{
	"fetch.max.bytes", "remote.fetch.prefetch.max.bytes", "remote.fetch.prefetch.gets", "remote.fetch.max.wait.ms",
	"remote.log.index.file.cache.total.size.bytes", "request_timeout", "remote.log.manager.fetch.max.bytes.per.second",
	"remote.fetch.chunk.cache.memory.bytes", "remote.fetch.chunk.cache.disk.bytes",
}

// DiskBudgetDynamic reports whether a running engine with c takes next's
// remote.fetch.chunk.cache.disk.bytes: when the disk tier is on and stays
// on (remote.fetch.chunk.cache.disk.dir set, a static key, and a budget
// above 0 before and after); with the dir empty or the budget 0 the tier
// is off, and turning it on or off needs a restart. DiskBudgetRule says
// this in a sentence.
func (c Config) DiskBudgetDynamic(next Config) bool {
	return c.Cache.DiskDir != "" && c.Cache.DiskBytes > 0 && next.Cache.DiskBytes > 0
}

// DiskBudgetRule is DiskBudgetDynamic's rule, for a refused change.
const DiskBudgetRule = "remote.fetch.chunk.cache.disk.bytes is dynamic only while the disk tier is on and stays on: " +
	"remote.fetch.chunk.cache.disk.dir set (static) and the budget above 0 before and after; " +
	"with disk.dir empty (the tier off) or a budget of 0, or a change to 0, it needs a restart"

// WithDynamic returns c with next's dynamic settings (DynamicKeys): what
// an engine given next by Reconfigure runs with. The disk budget is kept
// when DiskBudgetDynamic says no.
func (c Config) WithDynamic(next Config) Config {
	if c.DiskBudgetDynamic(next) {
		c.Cache.DiskBytes = next.Cache.DiskBytes
	}
	c.Cache.MemoryBytes = next.Cache.MemoryBytes
	c.FetchMaxBytes, c.PrefetchBytes, c.PrefetchGets, c.MaxWaitMs = next.FetchMaxBytes, next.PrefetchBytes, next.PrefetchGets, next.MaxWaitMs
	c.IndexCacheBytes, c.RequestTimeout, c.FetchMaxBytesPerSecond = next.IndexCacheBytes, next.RequestTimeout, next.FetchMaxBytesPerSecond
	return c
}

// conf returns the settings requests run with now.
func (s *Engine) conf() *Config { return s.dyn.Load() }

// initDynamic sets up what Reconfigure changes: the settings requests
// read, the fetch quota and its metric.
func (s *Engine) initDynamic() {
	cfg := s.cfg
	s.dyn.Store(&cfg)
	s.fetchQuota = quota.New(cfg.FetchMaxBytesPerSecond)
	promauto.With(s.reg).NewCounterFunc(prometheus.CounterOpts{Name: "tierd_fetch_quota_throttle_seconds_total",
		Help: "Time remote .log loads waited for the fetch quota (remote.log.manager.fetch.max.bytes.per.second), summed over the loads in flight."},
		func() float64 { return s.fetchQuota.Waited().Seconds() })
}

// throttled charges a remote .log body to the fetch quota.
func (s *Engine) throttled(ctx context.Context, rc io.ReadCloser) io.ReadCloser {
	return quota.ReadCloser(ctx, rc, s.fetchQuota)
}

// Reconfigure applies next's dynamic settings (DynamicKeys; the others
// are ignored) to the requests that start from now on, and the fetch
// quota, the index cache budget and the chunk cache's budgets at once (a
// smaller budget evicts down to it; readers keep the chunks they hold,
// see cache.SetBudgets). It returns Validate's error for the config that
// would run, and then changes nothing.
func (s *Engine) Reconfigure(next Config) error {
	merged := s.conf().WithDynamic(next)
	if err := merged.Validate(); err != nil {
		return fmt.Errorf("fetch: reconfigure: %w", err)
	}
	if err := s.cache.SetBudgets(merged.Cache.MemoryBytes, merged.Cache.DiskBytes); err != nil {
		return fmt.Errorf("fetch: reconfigure: %w", err)
	}
	s.dyn.Store(&merged)
	s.fetchQuota.SetRate(merged.FetchMaxBytesPerSecond)
	s.idx.setBudget(merged.IndexCacheBytes)
	return nil
}
