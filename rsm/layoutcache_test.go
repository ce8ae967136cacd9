package rsm

import (
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// The layout cache keeps the most recently used copies; a forgotten copy
// read again counts once, and costs no other copy its place.
func TestLayoutCacheLRU(t *testing.T) {
	c := newLayoutCache(3)
	ids := make([]remotelog.SegmentID, 5)
	for i := range ids {
		ids[i] = remotelog.SegmentID{byte(i + 1)}
	}
	ls := map[remotelog.SegmentID]*copyLayout{}
	for _, id := range ids[:3] {
		ls[id] = &copyLayout{}
		c.put(id, ls[id])
	}
	if c.get(ids[0]) != ls[ids[0]] { // 0 is now the most recent: 1 goes first
		t.Fatal("copy 0 not kept")
	}
	c.put(ids[3], &copyLayout{})
	if c.get(ids[1]) != nil || c.get(ids[0]) == nil || c.get(ids[2]) == nil || c.get(ids[3]) == nil {
		t.Fatal("the least recently used copy (1) was not the one dropped")
	}
	for range 10 { // forget and re-read one copy: the others stay
		c.forget(ids[3])
		if c.get(ids[3]) != nil {
			t.Fatal("forgotten copy still kept")
		}
		c.put(ids[3], &copyLayout{})
	}
	for _, i := range []int{0, 2, 3} {
		if c.get(ids[i]) == nil {
			t.Fatalf("copy %d dropped after another copy was forgotten and read again", i)
		}
	}
	if c.lru.Len() != 3 || len(c.m) != 3 {
		t.Fatalf("%d in order, %d in the map; want 3", c.lru.Len(), len(c.m))
	}
}
