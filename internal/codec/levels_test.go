package codec

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// TestLevels: every valid level round-trips through Kafka.Decompress, a
// higher level of gzip, lz4 (HC) and zstd gives smaller output than the
// lowest on text, and out-of-range levels are refused with the setting's
// name and range.
func TestLevels(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 200_000; i++ {
		fmt.Fprintf(&b, "event %d for user-%d: order %d shipped to warehouse %d. ", i, i%977, i*31%10007, i%13)
	}
	src := []byte(b.String())
	size := func(l Levels, c batch.Codec) int {
		t.Helper()
		comp, err := NewCompressor(l)
		if err != nil {
			t.Fatal(err)
		}
		out, err := comp.Compress(c, []byte("p"), src)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Kafka.Decompress(c, out[1:], len(src))
		if err != nil || !bytes.Equal(back, src) {
			t.Fatalf("%s at %+v: round trip: %v", c, l, err)
		}
		return len(out)
	}
	d := DefaultLevels()
	for _, c := range []batch.Codec{batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		size(d, c)
	}
	for _, tc := range []struct {
		c         batch.Codec
		low, high Levels
	}{
		{batch.CodecGzip, Levels{Gzip: 1, LZ4: 9, Zstd: 3}, Levels{Gzip: 9, LZ4: 9, Zstd: 3}},
		{batch.CodecLZ4, Levels{Gzip: -1, LZ4: 9, Zstd: 3}, Levels{Gzip: -1, LZ4: 17, Zstd: 3}},
		{batch.CodecZstd, Levels{Gzip: -1, LZ4: 9, Zstd: -5}, Levels{Gzip: -1, LZ4: 9, Zstd: 19}},
	} {
		if lo, hi := size(tc.low, tc.c), size(tc.high, tc.c); hi >= lo {
			t.Errorf("%s: %d bytes at %+v, %d at %+v: want the higher level smaller", tc.c, lo, tc.low, hi, tc.high)
		}
	}
	bad := Levels{Gzip: 0, LZ4: 18, Zstd: 23}
	errs := bad.Validate()
	if len(errs) != 3 {
		t.Fatalf("errors %v", errs)
	}
	for i, want := range []string{"compression.gzip.level 0: want 1 to 9, or -1", "compression.lz4.level 18: want 1 to 17", "compression.zstd.level 23: want -131072 to 22"} {
		if !strings.Contains(errs[i].Error(), want) {
			t.Errorf("%v does not say %q", errs[i], want)
		}
	}
	if _, err := NewCompressor(bad); err == nil {
		t.Fatal("NewCompressor accepted bad levels")
	}
}
