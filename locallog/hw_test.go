package locallog

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
)

// hwLog writes a rolled segment 0 ([0,2] [3] [4,7]) and an active
// segment 8 ([8,9] [10] [11,14]).
func hwLog(t *testing.T) string {
	dir := partitionDir(t)
	writeSegment(t, dir, 0, ent{base: 0, n: 3}, ent{base: 3, n: 1}, ent{base: 4, n: 4})
	writeSegment(t, dir, 8, ent{base: 8, n: 2}, ent{base: 10, n: 1}, ent{base: 11, n: 4})
	return dir
}

func lastOffsets(t *testing.T, data []byte) []int64 {
	var out []int64
	for _, b := range parseEntries(t, data) {
		out = append(out, b.LastOffset)
	}
	return out
}

// TestHighWatermarkBound serves a log whose high watermark comes from the
// broker: nothing at or past it is served, it is lowered to the local end
// and raised to the local log start, and a partition without one serves
// nothing.
func TestHighWatermarkBound(t *testing.T) {
	dir := hwLog(t)
	var hw atomic.Int64
	var has atomic.Bool
	has.Store(true)
	p := mustOpen(t, dir, Options{HighWatermark: func() (int64, bool) { return hw.Load(), has.Load() }})
	read := func(offset int64, limit int64) ([]int64, error) {
		data, err := p.Read(offset, 1<<20, limit)
		if err != nil {
			return nil, err
		}
		return lastOffsets(t, data), nil
	}
	expect := func(offset, limit int64, want ...int64) {
		t.Helper()
		got, err := read(offset, limit)
		if err != nil || len(got) != len(want) {
			t.Fatalf("hw %d: Read(%d, limit %d) = %v, %v; want last offsets %v", hw.Load(), offset, limit, got, err, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("hw %d: Read(%d, limit %d) = %v; want %v", hw.Load(), offset, limit, got, want)
			}
		}
	}
	expectOOR := func(offset int64) {
		t.Helper()
		var oor *OffsetOutOfRangeError
		if _, err := read(offset, 1<<40); !errors.As(err, &oor) || oor.HighWatermark != mustOffsets(t, p).HighWatermark {
			t.Fatalf("hw %d: Read(%d): %v, want *OffsetOutOfRangeError", hw.Load(), offset, err)
		}
	}
	offsets := func(want Offsets) {
		t.Helper()
		if o := mustOffsets(t, p); o != want {
			t.Fatalf("hw %d (has %v): Offsets = %+v, want %+v", hw.Load(), has.Load(), o, want)
		}
	}

	hw.Store(11) // an entry boundary in the active segment
	offsets(Offsets{0, 11, 11})
	expect(0, 1<<40, 2, 3, 7) // one segment per read
	expect(8, 1<<40, 9, 10)
	expect(11, 1<<40)
	expectOOR(12)
	if _, ts, found, err := p.MaxTimestamp(1 << 40); err != nil || !found || ts != 1_700_000_000_000+10 {
		t.Fatalf("MaxTimestamp below hw 11 = %d, %v, %v", ts, found, err)
	}
	if _, _, found, err := p.OffsetForTimestamp(1_700_000_000_000+11, 0, 1<<40); err != nil || found {
		t.Fatalf("OffsetForTimestamp of a record past the high watermark: found %v, %v", found, err)
	}

	hw.Store(13) // inside the entry [11,14]: that entry is not served
	offsets(Offsets{0, 13, 13})
	expect(11, 1<<40)
	expect(12, 1<<40)
	expectOOR(14)

	hw.Store(100) // past the local end
	offsets(Offsets{0, 15, 15})
	expect(11, 1<<40, 14)

	hw.Store(5) // inside the rolled segment
	offsets(Offsets{0, 5, 5})
	expect(0, 1<<40, 2, 3)
	expect(4, 1<<40)
	expectOOR(6)

	has.Store(false) // no high watermark: nothing served
	offsets(Offsets{0, 0, 0})
	expect(0, 1<<40)
	expectOOR(1)

	has.Store(true)
	hw.Store(5)
	if err := os.Remove(segPath(dir, 0, kafkalog.LogSuffix)); err != nil {
		t.Fatal(err)
	}
	offsets(Offsets{8, 8, 8}) // below the local log start: raised to it
	if _, err := read(3, 1<<40); !errors.Is(err, ErrBelowLocalStart) {
		t.Fatalf("Read below the local log start: %v", err)
	}

	// Without a HighWatermark the served end is the last whole, CRC-valid
	// entry; a torn one after it is not served until it is whole.
	q := mustOpen(t, dir, Options{})
	if o := mustOffsets(t, q); o.HighWatermark != 15 {
		t.Fatalf("Offsets = %+v, want HW 15", o)
	}
	raw := ent{base: 15, n: 3}.encode(t)
	appendRaw(t, segPath(dir, 8, kafkalog.LogSuffix), raw[:len(raw)-7])
	if o := mustOffsets(t, q); o.HighWatermark != 15 {
		t.Fatalf("with a torn entry: Offsets = %+v, want HW 15", o)
	}
	if data, err := q.Read(15, 1<<20, 1<<40); err != nil || len(data) != 0 {
		t.Fatalf("Read at the torn entry: %d bytes, %v", len(data), err)
	}
	appendRaw(t, segPath(dir, 8, kafkalog.LogSuffix), raw[len(raw)-7:])
	if o := mustOffsets(t, q); o.HighWatermark != 18 {
		t.Fatalf("once whole: Offsets = %+v, want HW 18", o)
	}
}

func mustOffsets(t testing.TB, p *Partition) Offsets {
	t.Helper()
	o, err := p.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func appendRaw(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}
