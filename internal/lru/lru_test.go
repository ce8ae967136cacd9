package lru

import "testing"

// The cache keeps the most recently used entries; an entry removed and
// put again counts once, and costs no other entry its place.
func TestLRU(t *testing.T) {
	c := New[int, string](3)
	for i := range 3 {
		c.Put(i, "v")
	}
	if _, ok := c.Get(0); !ok { // 0 is now the most recent: 1 goes first
		t.Fatal("entry 0 not kept")
	}
	c.Put(3, "v")
	if _, ok := c.Get(1); ok {
		t.Fatal("the least recently used entry (1) was kept")
	}
	for _, k := range []int{0, 2, 3} {
		if _, ok := c.Get(k); !ok {
			t.Fatalf("entry %d dropped", k)
		}
	}
	for range 10 {
		c.Remove(3)
		if _, ok := c.Get(3); ok {
			t.Fatal("removed entry still held")
		}
		c.Put(3, "w")
	}
	for _, k := range []int{0, 2, 3} {
		if _, ok := c.Get(k); !ok {
			t.Fatalf("entry %d dropped after another was removed and put again", k)
		}
	}
	if v, _ := c.Get(3); v != "w" || c.Len() != 3 || len(c.m) != 3 {
		t.Fatalf("value %q, %d held, %d in the map", v, c.Len(), len(c.m))
	}
	c.Put(0, "x") // an update keeps one entry
	if v, _ := c.Get(0); v != "x" || c.Len() != 3 {
		t.Fatalf("updated value %q, %d held", v, c.Len())
	}
}
