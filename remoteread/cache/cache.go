package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Config sizes the cache. Defaults are in DefaultConfig. The yaml names
// follow Kafka's remote.fetch.* family.
type Config struct {
	// ChunkBytes is the chunk size, bytes. Default 16777216 (16 MiB;
	// measured, see the package doc); minimum 4096.
	ChunkBytes int64 `yaml:"remote.fetch.chunk.bytes"`
	// MemoryBytes is the in-memory budget, bytes, loads in flight
	// included. Default 268435456 (256 MiB); at least 2 x ChunkBytes, as
	// a reader holds the chunks it scans in this tier.
	MemoryBytes int64 `yaml:"remote.fetch.chunk.cache.memory.bytes"`
	// DiskDir holds the disk tier; "" turns it off. Default "".
	DiskDir string `yaml:"remote.fetch.chunk.cache.disk.dir"`
	// DiskBytes is the disk budget, bytes. Default 10737418240 (10 GiB).
	DiskBytes int64 `yaml:"remote.fetch.chunk.cache.disk.bytes"`
	// MaxInflightGets bounds the ranged GETs loading chunks at once, for
	// reads and prefetch together; it also bounds the memory of loads in
	// flight to MaxInflightGets x ChunkBytes. Default 8.
	MaxInflightGets int `yaml:"remote.fetch.max.inflight.gets"`
	// PrefetchBudgetBytes bounds, for all readers together, the bytes of
	// prefetch loads in flight plus the prefetched bytes no read has used
	// yet; a prefetch that does not fit is skipped, never queued. At most
	// half of MemoryBytes is used, whatever this says, so demand reads
	// keep the other half. Default 134217728 (128 MiB).
	PrefetchBudgetBytes int64 `yaml:"remote.fetch.prefetch.budget.bytes"`
	// LoadTimeout bounds one chunk load (a GET and its body). A load is
	// not tied to the request that started it: a reader that gives up
	// leaves it running for the next. Default 30s.
	LoadTimeout time.Duration `yaml:"remote.fetch.load.timeout"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{ChunkBytes: 16 << 20, MemoryBytes: 256 << 20, DiskBytes: 10 << 30, MaxInflightGets: 8,
		PrefetchBudgetBytes: 128 << 20, LoadTimeout: 30 * time.Second}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.ChunkBytes < 4096 || c.ChunkBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("cache: remote.fetch.chunk.bytes %d must be from 4096 to 1073741824", c.ChunkBytes))
	}
	if c.MemoryBytes < 2*c.ChunkBytes {
		errs = append(errs, fmt.Errorf("cache: remote.fetch.chunk.cache.memory.bytes %d must be at least two chunks (%d)", c.MemoryBytes, 2*c.ChunkBytes))
	}
	if c.DiskBytes < 0 {
		errs = append(errs, fmt.Errorf("cache: remote.fetch.chunk.cache.disk.bytes %d must not be negative", c.DiskBytes))
	}
	if c.MaxInflightGets < 1 || c.MaxInflightGets > 1024 {
		errs = append(errs, fmt.Errorf("cache: remote.fetch.max.inflight.gets %d is out of range (from 1 to 1024 GETs at once)", c.MaxInflightGets))
	}
	if c.PrefetchBudgetBytes < 0 {
		errs = append(errs, fmt.Errorf("cache: remote.fetch.prefetch.budget.bytes %d must not be negative", c.PrefetchBudgetBytes))
	}
	if c.LoadTimeout <= 0 {
		errs = append(errs, fmt.Errorf("cache: remote.fetch.load.timeout %s must be positive", c.LoadTimeout))
	}
	return errors.Join(errs...)
}

// Object is a remote object read through the cache. Its contents must
// never change under the same Key (tierd's copies are immutable and named
// by segment id).
type Object struct {
	Key  string // unique name of the contents
	Size int64  // bytes
	// Open opens bytes [start, end) of the object (a ranged GET).
	Open func(ctx context.Context, start, end int64) (io.ReadCloser, error)
}

// Cache is a two-tier chunk cache. It is safe for concurrent use.
type Cache struct {
	cfg  Config
	mem  *lru
	disk *disk
	sem  chan struct{} // GET slots
	m    *metrics

	root   context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	inflight map[chunkKey][]*slot // loads in flight
	loads    sync.WaitGroup       // for Close
	pending  atomic.Int64         // loads not yet ended, disk write included
	pins     atomic.Int64         // Pins not yet released (pin.go)

	pool   bufPool
	pf     pfBudget
	pfGets atomic.Int32 // prefetch loads holding a GET slot
	loaded atomic.Int64 // bytes loaded from the store, ever

	rmu     sync.Mutex           // guards readers
	readers map[*Reader]struct{} // sequential readers not known to be gone (crowd.go)
	active  atomic.Int64         // of them, those active at the last count
	crowded atomic.Bool          // active x ChunkBytes > the memory budget at the last count
	counted atomic.Int64         // when the last count was taken, Unix ns
	pruned  int64                // when idle readers were last dropped, Unix ns; guarded by rmu
	prunes  int64                // passes dropping idle readers (for tests); guarded by rmu
}

// New opens the cache; with a disk tier it scans DiskDir. Close stops its
// loads.
func New(cfg Config, reg prometheus.Registerer) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	c := &Cache{cfg: cfg, m: newMetrics(reg), sem: make(chan struct{}, cfg.MaxInflightGets),
		inflight: map[chunkKey][]*slot{}, pool: newBufPool(cfg.ChunkBytes), readers: map[*Reader]struct{}{}}
	c.mem = newLRU(cfg.MemoryBytes, c.dropped)
	c.pf = pfBudget{fifo: list.New()}
	c.pfLimits(cfg.MemoryBytes)
	promauto.With(reg).NewGaugeFunc(prometheus.GaugeOpts{Name: "tierd_cache_prefetch_bytes",
		Help: "Bytes the shared prefetch budget holds: prefetch loads in flight plus prefetched bytes no read has used yet."},
		func() float64 { n, _ := c.PrefetchHeld(); return float64(n) })
	promauto.With(reg).NewGaugeFunc(prometheus.GaugeOpts{Name: "tierd_cache_sequential_readers",
		Help: "Sequential readers active at the last count (read while the cache loaded less than a memory budget's worth); more than the memory budget holds chunks for crowds the cache: no read-ahead, no whole-chunk loads."},
		func() float64 { return float64(c.active.Load()) })
	promauto.With(reg).NewCounterFunc(prometheus.CounterOpts{Name: "tierd_cache_buffer_reuses_total",
		Help: "Loads (whole chunks or parts) that filled a pooled buffer (one no holder used any more) instead of allocating one."},
		func() float64 { return float64(c.pool.reused.Load()) })
	if cfg.DiskDir != "" && cfg.DiskBytes > 0 {
		d, err := openDisk(cfg.DiskDir, cfg.DiskBytes, cfg.ChunkBytes)
		if err != nil {
			return nil, err
		}
		c.disk = d
	}
	c.root, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close cancels the loads in flight and waits for them to end, at most
// 10 seconds (a bucket client that ignores cancellation is left behind).
func (c *Cache) Close() {
	c.cancel()
	done := make(chan struct{})
	go func() { c.loads.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// Drop waits until no load is in flight, then empties both tiers (for
// benchmarks measuring cold reads, and tests). Reads running meanwhile
// are served as usual.
func (c *Cache) Drop() {
	c.Settle()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mem.clear()
	if c.disk != nil {
		c.disk.clear()
	}
}

// Settle waits until no load is in flight and the disk writes of those
// that ended are done (for benchmarks and tests; under steady reads it
// may wait long).
func (c *Cache) Settle() {
	for c.pending.Load() > 0 {
		time.Sleep(200 * time.Microsecond)
	}
}

// ChunkBytes returns the chunk size.
func (c *Cache) ChunkBytes() int64 { return c.cfg.ChunkBytes }

// chunkKey names chunk i of an object; as a map key it costs no
// allocation on the hit path.
type chunkKey struct {
	obj string
	i   int64
}

func key(object string, i int64) chunkKey { return chunkKey{object, i} }

// String is the disk tier's name for the chunk (hashed for the file
// name).
func (k chunkKey) String() string { return k.obj + "\x00" + strconv.FormatInt(k.i, 10) }

// chunkLen is the length of chunk i of an object of size bytes.
func (c *Cache) chunkLen(size, i int64) int64 {
	return min(c.cfg.ChunkBytes, size-i*c.cfg.ChunkBytes)
}

// View returns bytes [off, off+n) of obj, waiting until ctx ends for the
// loads it needs. Within one chunk the result shares the cached bytes
// (read-only; that chunk's buffer is then never reused for another chunk);
// across chunks it is a copy. Errors: ctx's error, a load's error (the
// next View tries again), or a range outside the object.
//
// A chunk not cached at all is loaded for the bytes asked only (at least
// a quarter chunk, within the chunk), so a cold random read costs one GET
// of about its own bytes; a later read of other bytes of that chunk loads
// the whole chunk. Readers wait only for the bytes they need, as the body
// arrives.
func (c *Cache) View(ctx context.Context, obj Object, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > obj.Size {
		return nil, fmt.Errorf("cache: bytes %d-%d outside %s of %d bytes", off, off+n, obj.Key, obj.Size)
	}
	if n == 0 {
		return nil, nil
	}
	cb := c.cfg.ChunkBytes
	first, last := off/cb, (off+n-1)/cb
	if first == last {
		return c.viewChunk(ctx, obj, first, off-first*cb, off-first*cb+n)
	}
	v, err := c.Read(ctx, obj, off, n, nil) // chunks not cached load with one GET
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Read appends bytes [off, off+n) of obj to dst and returns it: a copy,
// so that it stays valid whatever the cache does next and no chunk's
// buffer escapes the pool (Cache.View's single-chunk answers do). It
// holds the chunks only while it copies. Loads and errors are View's.
func (c *Cache) Read(ctx context.Context, obj Object, off, n int64, dst []byte) ([]byte, error) {
	if off < 0 || n < 0 || off+n > obj.Size {
		return dst, fmt.Errorf("cache: bytes %d-%d outside %s of %d bytes", off, off+n, obj.Key, obj.Size)
	}
	if n == 0 {
		return dst, nil
	}
	slots := c.touch(obj, off, n, noLimit)
	defer c.unrefAll(slots)
	cb := c.cfg.ChunkBytes
	first := off / cb
	dst = slices.Grow(dst, int(n))
	for j, s := range slots {
		i := first + int64(j)
		a, b := max(off-i*cb, 0), min(off+n-i*cb, c.chunkLen(obj.Size, i))
		v, err := s.wait(ctx, a, b)
		if err != nil {
			return dst, err
		}
		dst = append(dst, v...)
	}
	return dst, nil
}

// unrefAll drops a reference to each of slots.
func (c *Cache) unrefAll(slots []*slot) {
	for _, s := range slots {
		c.unref(s)
	}
}

// gather copies bytes [off, off+n) of an object of size bytes out of
// slots, the slots of chunks first, first+1, ..., waiting for each until
// ctx ends. The caller holds references to the slots.
func gather(ctx context.Context, slots []*slot, first, cb, off, n, size int64) ([]byte, error) {
	out := make([]byte, 0, n)
	for j, s := range slots {
		i := first + int64(j)
		a, b := max(off-i*cb, 0), min(off+n-i*cb, min(cb, size-i*cb))
		v, err := s.wait(ctx, a, b)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return out, nil
}

// viewChunk returns chunk-relative bytes [a, b) of chunk i, a slice of
// the cached bytes (which escape).
func (c *Cache) viewChunk(ctx context.Context, obj Object, i, a, b int64) ([]byte, error) {
	k := key(obj.Key, i)
	s, ok := c.mem.acquire(k, true)
	if ok && s.covers(a, b) {
		c.m.hits.WithLabelValues("memory").Inc()
		c.used(s)
		escape(s)
		v := s.buf[a-s.from : b-s.from]
		c.unref(s)
		return v, nil
	}
	if ok {
		c.unref(s)
	}
	s, hit := c.find(obj, i, k, a, b)
	if hit != "" {
		c.m.hits.WithLabelValues(hit).Inc()
	}
	escape(s)
	defer c.unref(s)
	return s.wait(ctx, a, b)
}

// find returns a slot holding (or loading) chunk-relative bytes [a, b),
// with a reference for the caller: cached on disk, in flight, or a new
// load. hit names the tier that had the chunk ("" for a new load).
func (c *Cache) find(obj Object, i int64, k chunkKey, a, b int64) (s *slot, hit string) {
	s, hit, isNew := c.claim(obj, i, k, a, b, noLimit)
	if isNew {
		c.start(obj, []part{{i, k, s}}, false)
	}
	return s, hit
}

// lookupLocked finds a memory entry or a load in flight that holds bytes
// [a, b) and takes a reference to it (caller holds mu). Otherwise held is
// the memory tier's part of the chunk, with a reference (nil when there is
// none), and loading says a load of another part is in flight.
func (c *Cache) lookupLocked(k chunkKey, a, b int64) (s *slot, hit string, held *slot, loading bool) {
	if s, ok := c.mem.acquire(k, false); ok { // filled since the first look
		if s.covers(a, b) {
			return s, "memory", nil, false
		}
		held = s
	}
	for _, s := range c.inflight[k] {
		if s.covers(a, b) && s.ref() {
			if held != nil {
				c.unref(held)
			}
			return s, "inflight", nil, false
		}
	}
	return nil, "", held, len(c.inflight[k]) > 0
}

// touch starts the loads of bytes [off, off+n) of obj that are neither
// cached nor in flight, with one GET for each run of consecutive chunks,
// and returns, per chunk, the slot that holds or will hold its part, with
// a reference for the caller. limit is the object byte its loads read
// ahead to (see PinAhead), or noLimit for the cache's own rules (claim).
func (c *Cache) touch(obj Object, off, n, limit int64) []*slot {
	if off < 0 || n <= 0 || off+n > obj.Size {
		return nil
	}
	cb := c.cfg.ChunkBytes
	var slots []*slot
	var run []part // new slots that one GET can fill
	flush := func() {
		if len(run) > 0 {
			c.start(obj, run, false)
			run = nil
		}
	}
	for i := off / cb; i <= (off+n-1)/cb; i++ {
		a, b := max(off-i*cb, 0), min(off+n-i*cb, c.chunkLen(obj.Size, i))
		k := key(obj.Key, i)
		s, ok := c.mem.acquire(k, true)
		if ok && s.covers(a, b) {
			c.m.hits.WithLabelValues("memory").Inc()
			c.used(s)
			flush()
			slots = append(slots, s)
			continue
		}
		if ok {
			c.unref(s)
		}
		lim := int64(noLimit)
		if limit != noLimit {
			lim = max(limit-i*cb, b)
		}
		s, hit, isNew := c.claim(obj, i, k, a, b, lim)
		slots = append(slots, s)
		if !isNew {
			c.m.hits.WithLabelValues(hit).Inc()
			flush()
			continue
		}
		if s.pre != nil || s.base != nil { // extends the cached part: a GET of its own
			flush()
			c.start(obj, []part{{i, k, s}}, false)
			continue
		}
		if len(run) > 0 && (run[len(run)-1].s.to != c.chunkLen(obj.Size, i-1) || s.from != 0) {
			flush()
		}
		run = append(run, part{i, k, s})
	}
	flush()
	return slots
}

// Loading reports whether a load of some part of chunk i of obj is in
// flight.
func (c *Cache) Loading(obj Object, i int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight[key(obj.Key, i)]) > 0
}

// finish ends a load: the slot leaves the in-flight set and, when the load
// succeeded, enters the memory tier (unless a larger part of the chunk is
// there and the load was not made while crowded, see crowd.go); waiters
// wake.
func (c *Cache) finish(k chunkKey, s *slot, err error) {
	c.mu.Lock()
	list := c.inflight[k]
	for j, x := range list {
		if x == s {
			list = append(list[:j:j], list[j+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(c.inflight, k)
	} else {
		c.inflight[k] = list
	}
	kept := err == nil && c.mem.put(k, s)
	c.mu.Unlock()
	if s.pre != nil { // the load ended before it copied the cached part
		c.unref(s.pre)
		s.pre = nil
	}
	s.end(err)
	if err != nil {
		c.pfDone(s, "failed")
	}
	if !kept {
		c.pfDone(s, "evicted")
		c.unref(s) // the cache's reference
	}
}
