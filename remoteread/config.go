package remoteread

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tierd/tierd/internal/saturate"
	"github.com/tierd/tierd/remoteread/cache"
)

// Config configures the engine. Defaults are in DefaultConfig; the yaml
// names of the remote read knobs follow Kafka's (remote.fetch.*,
// remote.log.*). They sit in tierd.yaml's fetch: section, beside the gRPC
// edge's listen (package grpcapi).
type Config struct {
	// FetchMaxBytes caps a request's max_bytes (Kafka's fetch.max.bytes).
	// Default 52428800.
	FetchMaxBytes int32 `yaml:"fetch.max.bytes"`
	// Cache is the chunk cache: chunk size, memory and disk budgets, GETs
	// in flight (see cache.Config).
	Cache cache.Config `yaml:",inline"`
	// PrefetchBytes is the most a sequential reader is read ahead,
	// across segment boundaries, bytes; 0 turns prefetch off. A reader
	// is read ahead by at most an eighth of what it has read so far, up
	// to this (readahead.go). Default 67108864 (64 MiB; measured, see
	// package cache's doc).
	PrefetchBytes int64 `yaml:"remote.fetch.prefetch.max.bytes"`
	// PrefetchGets is how many of one sequential reader's prefetch loads
	// (one GET each) may be in flight at once. All readers' prefetches
	// together stay within remote.fetch.prefetch.budget.bytes and, with
	// two or more remote.fetch.max.inflight.gets, leave demand reads one.
	// Default 2.
	PrefetchGets int `yaml:"remote.fetch.prefetch.gets"`
	// MaxWaitMs bounds, in ms, how long a fetch waits for remote data
	// (Kafka's remote.fetch.max.wait.ms): past it, a fetch answers with
	// the batches that have arrived, or UNAVAILABLE when not even the
	// first has (its load goes on, so a retry finds it cached).
	// Default 500.
	MaxWaitMs int64 `yaml:"remote.fetch.max.wait.ms"`
	// IndexCacheBytes is the memory budget of parsed remote offset, time
	// and transaction indexes, bytes (after Kafka's
	// remote.log.index.file.cache.total.size.bytes). Default 67108864.
	IndexCacheBytes int64 `yaml:"remote.log.index.file.cache.total.size.bytes"`
	// RequestTimeout bounds one read (a call of the Go read API, an RPC of
	// the gRPC edge), so a hung store cannot hold a request (or a
	// shutdown) forever. Default 30s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// FetchMaxBytesPerSecond caps the bytes of remote .log objects all
	// reads and prefetches together load from the store per second
	// (KIP-956's remote.log.manager.fetch.max.bytes.per.second), with
	// bursts of a tenth of a second's worth (package quota); cached
	// chunks are not counted. A fetch that waits past
	// remote.fetch.max.wait.ms answers as usual (UNAVAILABLE when nothing
	// arrived; the load goes on). Default 9223372036854775807
	// (Long.MAX_VALUE): no limit.
	FetchMaxBytesPerSecond int64 `yaml:"remote.log.manager.fetch.max.bytes.per.second"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{FetchMaxBytes: 52428800, Cache: cache.DefaultConfig(),
		PrefetchBytes: 64 << 20, PrefetchGets: 2, MaxWaitMs: 500, IndexCacheBytes: 64 << 20, RequestTimeout: 30 * time.Second, FetchMaxBytesPerSecond: math.MaxInt64}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.FetchMaxBytes < 1 {
		errs = append(errs, fmt.Errorf("fetch: fetch.max.bytes %d must be positive", c.FetchMaxBytes))
	}
	if err := c.Cache.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("fetch: %w", err))
	}
	if c.PrefetchBytes < 0 {
		errs = append(errs, fmt.Errorf("fetch: remote.fetch.prefetch.max.bytes %d must not be negative", c.PrefetchBytes))
	}
	if c.PrefetchGets < 1 {
		errs = append(errs, fmt.Errorf("fetch: remote.fetch.prefetch.gets %d must be positive", c.PrefetchGets))
	}
	if c.MaxWaitMs < 1 || c.MaxWaitMs > 3600000 {
		errs = append(errs, fmt.Errorf("fetch: remote.fetch.max.wait.ms %d must be from 1 to 3600000", c.MaxWaitMs))
	}
	if c.IndexCacheBytes < 0 {
		errs = append(errs, fmt.Errorf("fetch: remote.log.index.file.cache.total.size.bytes %d must not be negative", c.IndexCacheBytes))
	}
	if c.FetchMaxBytesPerSecond < 1 {
		errs = append(errs, fmt.Errorf("fetch: remote.log.manager.fetch.max.bytes.per.second %d must be at least 1 (9223372036854775807: no limit)", c.FetchMaxBytesPerSecond))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("fetch: request_timeout %s must be positive", c.RequestTimeout))
	}
	return errors.Join(errs...)
}

// MemoryBytes is the memory the engine's caches may hold, bytes: the
// chunk cache's memory budget (loads in flight included) and the index
// cache's budget. Transport
// buffers (about max_bytes per request being answered) come on top.
func (c Config) MemoryBytes() int64 {
	return saturate.Add(c.Cache.MemoryBytes, c.IndexCacheBytes)
}
