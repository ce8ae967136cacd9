package fetch

import (
	"container/list"
	"context"
	"sync"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
)

type indexEntry struct {
	id      remotelog.SegmentID
	offsets []index.OffsetEntry
	times   []index.TimeEntry
}

// indexCache keeps the parsed offset and time indexes of the most recently
// used segments (LRU by count). Copies are immutable and ids are never
// reused, so entries never go stale.
type indexCache struct {
	mu    sync.Mutex
	cap   int
	ll    *list.List
	items map[remotelog.SegmentID]*list.Element
}

func newIndexCache(n int) *indexCache {
	return &indexCache{cap: n, ll: list.New(), items: map[remotelog.SegmentID]*list.Element{}}
}

func (c *indexCache) get(id remotelog.SegmentID) (*indexEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[id]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*indexEntry), true
	}
	return nil, false
}

func (c *indexCache) put(v *indexEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[v.id]; ok {
		return
	}
	c.items[v.id] = c.ll.PushFront(v)
	for c.ll.Len() > c.cap {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*indexEntry).id)
	}
}

// indexes returns a copy's parsed offset and time indexes.
func (s *Server) indexes(ctx context.Context, meta remotelog.SegmentMetadata) ([]index.OffsetEntry, []index.TimeEntry, error) {
	if e, ok := s.idx.get(meta.ID); ok {
		return e.offsets, e.times, nil
	}
	raw, err := s.rs.FetchIndex(ctx, meta, remotelog.OffsetIndex)
	if err != nil {
		return nil, nil, err
	}
	offs, err := index.ParseOffsetIndex(raw, meta.StartOffset)
	if err != nil {
		return nil, nil, kafkalog.WithFile(err, meta.ID.String()+".index")
	}
	raw, err = s.rs.FetchIndex(ctx, meta, remotelog.TimeIndex)
	if err != nil {
		return nil, nil, err
	}
	times, err := index.ParseTimeIndex(raw, meta.StartOffset)
	if err != nil {
		return nil, nil, kafkalog.WithFile(err, meta.ID.String()+".timeindex")
	}
	s.idx.put(&indexEntry{id: meta.ID, offsets: offs, times: times})
	return offs, times, nil
}
