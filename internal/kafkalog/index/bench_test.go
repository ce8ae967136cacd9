package index

import (
	"sort"
	"testing"
)

// benchEntries is the offset index of a 32 MiB segment of 16 KiB batches
// of 16 records: 2048 entries.
func benchEntries() []OffsetEntry {
	es := make([]OffsetEntry, 2048)
	for i := range es {
		es[i] = OffsetEntry{Offset: int64(i*16 + 15), Position: int32(i * 16700)}
	}
	return es
}

// BenchmarkLookupOffset finds the entry for an offset, as every fetch
// does; BenchmarkLookupOffsetBaseline is a bare binary search of the same
// offsets.
func BenchmarkLookupOffset(b *testing.B) {
	es := benchEntries()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		t := int64(i*7919) % 32768
		if _, ok := LookupOffset(es, t); !ok && t >= 15 {
			b.Fatal("not found")
		}
	}
}

func BenchmarkLookupOffsetBaseline(b *testing.B) {
	es := benchEntries()
	offs := make([]int64, len(es))
	for i, e := range es {
		offs[i] = e.Offset
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = sort.Search(len(offs), func(j int) bool { return offs[j] > int64(i*7919)%32768 })
	}
}

// BenchmarkParseOffsetIndex parses a 2048-entry .index file (once per
// segment, then cached).
func BenchmarkParseOffsetIndex(b *testing.B) {
	raw, err := EncodeOffsets(0, benchEntries())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseOffsetIndex(raw, 0); err != nil {
			b.Fatal(err)
		}
	}
}
