package fetch

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
// (remote.fetch.max.wait.ms, remote.log.index.file.cache.total.size.bytes,
// the fetch quota) and tierd's per-request bounds. The listen address and
// the chunk cache (chunk size, budgets, disk dir, GETs in flight, load
// timeout) need a restart: chunks in use are cut to the chunk size, and
// the budgets size the process's memory limit.
var DynamicKeys = []string{
	"fetch.max.bytes", "remote.fetch.prefetch.max.bytes", "remote.fetch.prefetch.gets", "remote.fetch.max.wait.ms",
	"remote.log.index.file.cache.total.size.bytes", "request_timeout", "remote.log.manager.fetch.max.bytes.per.second",
}

// WithDynamic returns c with next's dynamic settings (DynamicKeys): what
// a server given next by Reconfigure runs with.
func (c Config) WithDynamic(next Config) Config {
	c.FetchMaxBytes, c.PrefetchBytes, c.PrefetchGets, c.MaxWaitMs = next.FetchMaxBytes, next.PrefetchBytes, next.PrefetchGets, next.MaxWaitMs
	c.IndexCacheBytes, c.RequestTimeout, c.FetchMaxBytesPerSecond = next.IndexCacheBytes, next.RequestTimeout, next.FetchMaxBytesPerSecond
	return c
}

// conf returns the settings requests run with now.
func (s *Server) conf() *Config { return s.dyn.Load() }

// initDynamic sets up what Reconfigure changes: the settings requests
// read, the fetch quota and its metric.
func (s *Server) initDynamic() {
	cfg := s.cfg
	s.dyn.Store(&cfg)
	s.fetchQuota = quota.New(cfg.FetchMaxBytesPerSecond)
	promauto.With(s.reg).NewCounterFunc(prometheus.CounterOpts{Name: "tierd_fetch_quota_throttle_seconds_total",
		Help: "Time remote .log loads waited for the fetch quota (remote.log.manager.fetch.max.bytes.per.second), summed over the loads in flight."},
		func() float64 { return s.fetchQuota.Waited().Seconds() })
}

// throttled charges a remote .log body to the fetch quota.
func (s *Server) throttled(ctx context.Context, rc io.ReadCloser) io.ReadCloser {
	return quota.ReadCloser(ctx, rc, s.fetchQuota)
}

// Reconfigure applies next's dynamic settings (DynamicKeys; the others
// are ignored) to the requests that start from now on, and the fetch
// quota and index cache budget at once (a smaller budget evicts). It
// returns Validate's error for the config that would run, and then
// changes nothing.
func (s *Server) Reconfigure(next Config) error {
	merged := s.cfg.WithDynamic(next)
	if err := merged.Validate(); err != nil {
		return fmt.Errorf("fetch: reconfigure: %w", err)
	}
	s.dyn.Store(&merged)
	s.fetchQuota.SetRate(merged.FetchMaxBytesPerSecond)
	s.idx.setBudget(merged.IndexCacheBytes)
	return nil
}
