package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"golang.org/x/sync/singleflight"
)

// Config sizes the cache. Defaults are in DefaultConfig.
type Config struct {
	// ChunkBytes is the chunk size, bytes. Default 4194304 (4 MiB);
	// minimum 4096.
	ChunkBytes int64 `yaml:"chunk.bytes"`
	// MemoryBytes is the in-memory budget, bytes. Default 268435456
	// (256 MiB); 0 turns the memory tier off.
	MemoryBytes int64 `yaml:"memory.bytes"`
	// DiskDir holds the disk tier; "" turns it off. Default "".
	DiskDir string `yaml:"disk.dir"`
	// DiskBytes is the disk budget, bytes. Default 10737418240 (10 GiB).
	DiskBytes int64 `yaml:"disk.bytes"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{ChunkBytes: 4 << 20, MemoryBytes: 256 << 20, DiskBytes: 10 << 30}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.ChunkBytes < 4096 {
		errs = append(errs, fmt.Errorf("cache: chunk.bytes %d must be at least 4096", c.ChunkBytes))
	}
	if c.MemoryBytes < 0 || c.DiskBytes < 0 {
		errs = append(errs, fmt.Errorf("cache: memory.bytes %d and disk.bytes %d must not be negative", c.MemoryBytes, c.DiskBytes))
	}
	return errors.Join(errs...)
}

// Loader reads chunk index of an object from the store; the result holds
// at most ChunkBytes bytes (fewer for the object's last chunk).
type Loader func(ctx context.Context) ([]byte, error)

// Cache is a two-tier chunk cache. It is safe for concurrent use.
type Cache struct {
	cfg  Config
	mem  *lru
	disk *disk
	sf   singleflight.Group
	m    *metrics
}

// New opens the cache; with a disk tier it scans DiskDir.
func New(cfg Config, reg prometheus.Registerer) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	c := &Cache{cfg: cfg, mem: newLRU(cfg.MemoryBytes), m: newMetrics(reg)}
	if cfg.DiskDir != "" && cfg.DiskBytes > 0 {
		d, err := openDisk(cfg.DiskDir, cfg.DiskBytes)
		if err != nil {
			return nil, err
		}
		c.disk = d
	}
	return c, nil
}

// ChunkBytes returns the chunk size.
func (c *Cache) ChunkBytes() int64 { return c.cfg.ChunkBytes }

func key(object string, index int64) string { return object + "\x00" + strconv.FormatInt(index, 10) }

// Get returns chunk index of object from memory, then disk, then load
// (once for all concurrent callers of the same chunk), filling the tiers it
// missed. The returned slice must not be modified.
func (c *Cache) Get(ctx context.Context, object string, index int64, load Loader) ([]byte, error) {
	k := key(object, index)
	if v, ok := c.mem.get(k); ok {
		c.m.hits.WithLabelValues("memory").Inc()
		return v, nil
	}
	v, err, _ := c.sf.Do(k, func() (any, error) {
		if v, ok := c.mem.get(k); ok { // filled while we waited
			return v, nil
		}
		if c.disk != nil {
			if v, ok := c.disk.get(k); ok {
				c.m.hits.WithLabelValues("disk").Inc()
				c.mem.put(k, v)
				return v, nil
			}
		}
		c.m.misses.Inc()
		v, err := load(ctx)
		if err != nil {
			return nil, err
		}
		c.m.loadedBytes.Add(float64(len(v)))
		c.mem.put(k, v)
		if c.disk != nil {
			if err := c.disk.put(k, v); err != nil {
				c.m.diskErrors.Inc() // the chunk is served anyway
			}
		}
		return v, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// Contains reports whether a chunk is cached in memory or on disk, without
// loading it (prefetch uses it to skip work).
func (c *Cache) Contains(object string, index int64) bool {
	k := key(object, index)
	if _, ok := c.mem.peek(k); ok {
		return true
	}
	return c.disk != nil && c.disk.has(k)
}

// lru is an in-memory LRU of byte slices within a byte budget.
type lru struct {
	mu     sync.Mutex
	budget int64
	size   int64
	ll     *list.List
	items  map[string]*list.Element
}

type entry struct {
	key string
	val []byte
}

func newLRU(budget int64) *lru {
	return &lru{budget: budget, ll: list.New(), items: map[string]*list.Element{}}
}

func (l *lru) get(k string) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.items[k]; ok {
		l.ll.MoveToFront(e)
		return e.Value.(*entry).val, true
	}
	return nil, false
}

func (l *lru) peek(k string) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.items[k]; ok {
		return e.Value.(*entry).val, true
	}
	return nil, false
}

func (l *lru) put(k string, v []byte) {
	if int64(len(v)) > l.budget {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.items[k]; ok {
		l.size -= int64(len(e.Value.(*entry).val))
		e.Value.(*entry).val = v
		l.size += int64(len(v))
		l.ll.MoveToFront(e)
	} else {
		l.items[k] = l.ll.PushFront(&entry{key: k, val: v})
		l.size += int64(len(v))
	}
	for l.size > l.budget {
		last := l.ll.Back()
		e := last.Value.(*entry)
		l.ll.Remove(last)
		delete(l.items, e.key)
		l.size -= int64(len(e.val))
	}
}

type metrics struct {
	hits                            *prometheus.CounterVec
	misses, loadedBytes, diskErrors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		hits:        f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_cache_hits_total", Help: "Chunk reads served from the cache, by tier."}, []string{"tier"}),
		misses:      f.NewCounter(prometheus.CounterOpts{Name: "tierd_cache_misses_total", Help: "Chunk reads that loaded from the object store."}),
		loadedBytes: f.NewCounter(prometheus.CounterOpts{Name: "tierd_cache_loaded_bytes_total", Help: "Bytes loaded from the object store into the cache."}),
		diskErrors:  f.NewCounter(prometheus.CounterOpts{Name: "tierd_cache_disk_errors_total", Help: "Chunks that could not be written to the disk tier."}),
	}
	m.hits.WithLabelValues("memory")
	m.hits.WithLabelValues("disk")
	return m
}
