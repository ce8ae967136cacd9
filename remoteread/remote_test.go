package remoteread

import (
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/index"
)

// upfrontEnd: the segment's end when within max_bytes, else the last
// indexed batch start within max_bytes of pos, else pos.
func TestUpfrontEnd(t *testing.T) {
	offsets := []index.OffsetEntry{{Offset: 9, Position: 4000}, {Offset: 19, Position: 9000}, {Offset: 29, Position: 15000}}
	for _, tc := range []struct{ pos, maxBytes, size, want int64 }{
		{0, 20000, 18000, 18000}, // the rest of the segment is within max_bytes
		{0, 10000, 18000, 9000},  // the last indexed start within 10000
		{4000, 10000, 18000, 9000},
		{4000, 4000, 18000, 4000}, // no indexed start after pos within max_bytes
		{0, 0, 18000, 0},
		{9000, 6000, 18000, 15000}, // exactly at an indexed start
	} {
		if got := upfrontEnd(offsets, tc.pos, tc.maxBytes, tc.size); got != tc.want {
			t.Errorf("upfrontEnd(pos %d, max %d, size %d) = %d, want %d", tc.pos, tc.maxBytes, tc.size, got, tc.want)
		}
	}
}
