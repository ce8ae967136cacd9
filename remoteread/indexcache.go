package remoteread

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sync/singleflight"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
)

// indexCache keeps parsed remote offset, time and transaction indexes in
// memory, LRU within a byte budget
// (remote.log.index.file.cache.total.size.bytes). Copies are immutable and segment ids are never reused, so entries never
// go stale. Concurrent misses of one index make one GET.
type indexCache struct {
	mu     sync.Mutex
	budget int64
	size   int64
	ll     *list.List
	items  map[indexKey]*list.Element
	sf     singleflight.Group
}

type indexKey struct {
	id remotelog.SegmentID
	t  remotelog.IndexType
}

type indexItem struct {
	key  indexKey
	val  any // []index.OffsetEntry, []index.TimeEntry or []index.AbortedTxn
	size int64
}

func newIndexCache(budget int64) *indexCache {
	return &indexCache{budget: budget, ll: list.New(), items: map[indexKey]*list.Element{}}
}

func (c *indexCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	c.items = map[indexKey]*list.Element{}
	c.size = 0
}

// setBudget changes the budget, evicting the least recently used
// indexes down to a smaller one.
func (c *indexCache) setBudget(budget int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.budget = budget
	c.evict()
}

// evict drops the least recently used entries until size is within the
// budget. c.mu is held.
func (c *indexCache) evict() {
	for c.size > c.budget && c.ll.Len() > 0 {
		last := c.ll.Back()
		it := last.Value.(*indexItem)
		c.ll.Remove(last)
		delete(c.items, it.key)
		c.size -= it.size
	}
}

func (c *indexCache) get(k indexKey) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*indexItem).val, true
	}
	return nil, false
}

func (c *indexCache) put(k indexKey, v any, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok || size > c.budget {
		return
	}
	c.items[k] = c.ll.PushFront(&indexItem{key: k, val: v, size: size})
	c.size += size
	c.evict()
}

// load returns the cached value of k or loads it once for all concurrent
// callers. The load is not tied to the caller that started it (a caller
// leaving at ctx's end does not fail the others); it gets timeout.
func (c *indexCache) load(ctx context.Context, timeout time.Duration, k indexKey, fn func(context.Context) (any, int64, error)) (any, error) {
	if v, ok := c.get(k); ok {
		return v, nil
	}
	ch := c.sf.DoChan(k.id.String()+k.t.Suffix(), func() (any, error) {
		if v, ok := c.get(k); ok {
			return v, nil
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		v, size, err := safeLoad(lctx, fn)
		if err != nil {
			return nil, err
		}
		c.put(k, v, size)
		return v, nil
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// safeLoad runs fn, turning a panic (a bucket client's bug) into an error:
// singleflight would re-raise it on a goroutine of its own, ending the
// daemon.
func safeLoad(ctx context.Context, fn func(context.Context) (any, int64, error)) (v any, size int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, size, err = nil, 0, fmt.Errorf("fetch: index load panicked: %v", r)
		}
	}()
	return fn(ctx)
}

// offsetIndex returns a copy's parsed offset index.
func (s *Engine) offsetIndex(ctx context.Context, meta remotelog.SegmentMetadata) ([]index.OffsetEntry, error) {
	v, err := s.idx.load(ctx, s.conf().RequestTimeout, indexKey{meta.ID, remotelog.OffsetIndex}, func(ctx context.Context) (any, int64, error) {
		raw, err := s.fetchIndex(ctx, meta, remotelog.OffsetIndex)
		if err != nil {
			return nil, 0, err
		}
		offs, err := index.ParseOffsetIndex(raw, meta.StartOffset)
		if err != nil {
			return nil, 0, kafkalog.WithFile(err, meta.ID.String()+".index")
		}
		return offs, int64(cap(offs)) * int64(unsafe.Sizeof(index.OffsetEntry{})), nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]index.OffsetEntry), nil
}

// timeIndex returns a copy's parsed time index; it is loaded only when a
// timestamp lookup needs it.
func (s *Engine) timeIndex(ctx context.Context, meta remotelog.SegmentMetadata) ([]index.TimeEntry, error) {
	v, err := s.idx.load(ctx, s.conf().RequestTimeout, indexKey{meta.ID, remotelog.TimeIndex}, func(ctx context.Context) (any, int64, error) {
		raw, err := s.fetchIndex(ctx, meta, remotelog.TimeIndex)
		if err != nil {
			return nil, 0, err
		}
		times, err := index.ParseTimeIndex(raw, meta.StartOffset)
		if err != nil {
			return nil, 0, kafkalog.WithFile(err, meta.ID.String()+".timeindex")
		}
		return times, int64(cap(times)) * int64(unsafe.Sizeof(index.TimeEntry{})), nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]index.TimeEntry), nil
}

func (s *Engine) fetchIndex(ctx context.Context, meta remotelog.SegmentMetadata, t remotelog.IndexType) ([]byte, error) {
	s.m.indexGets.Inc()
	raw, err := s.rs.FetchIndex(ctx, meta, t)
	s.m.indexBytes.Add(float64(len(raw)))
	return raw, err
}
