// Package lru is a bounded map that drops its least recently used entry
// past its bound: the small in-memory caches of decoded objects (copies'
// manifests and chunk layouts) keyed by segment id.
package lru

import (
	"container/list"
	"sync"
)

// Cache maps keys to values, holding at most its bound. It is safe for
// concurrent use.
type Cache[K comparable, V any] struct {
	mu  sync.Mutex
	max int
	m   map[K]*list.Element // of *entry[K, V]
	ll  list.List           // front: most recently used
}

type entry[K comparable, V any] struct {
	k K
	v V
}

// New returns a Cache of at most n entries (at least 1).
func New[K comparable, V any](n int) *Cache[K, V] {
	return &Cache[K, V]{max: max(n, 1), m: map[K]*list.Element{}}
}

// Get returns k's value, and whether it is held; a hit makes k the most
// recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*entry[K, V]).v, true
}

// Put sets k's value, the most recently used, and drops the least
// recently used entries past the bound.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		e.Value.(*entry[K, V]).v = v
		c.ll.MoveToFront(e)
		return
	}
	c.m[k] = c.ll.PushFront(&entry[K, V]{k, v})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*entry[K, V]).k)
	}
}

// Remove drops k; the place it held is free.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		c.ll.Remove(e)
		delete(c.m, k)
	}
}

// Len is how many entries are held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
