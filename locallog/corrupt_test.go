package locallog

import (
	"encoding/binary"
	"errors"
	"math/rand"
	"os"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

func patch(t testing.TB, path string, pos int64, b ...byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptEntry damages entries in the middle of a rolled segment (a
// payload byte: CRC mismatch; the magic: a bad header) and of the active
// segment: a read starting there is kafkalog.ErrCorrupt naming the file, a
// read before it stops short of it, and without a HighWatermark the active
// segment's bad entry ends the served log.
func TestCorruptEntry(t *testing.T) {
	l, dir := newSeglog(t)
	appendBatches(t, l, rand.New(rand.NewSource(5)), 90, 4, 30)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ref := reference(t, dir)
	var mid []int // entries of the middle segment
	for i, e := range ref {
		if e.seg == ref[len(ref)/2].seg {
			mid = append(mid, i)
		}
	}
	crcBad, magicBad := ref[mid[len(mid)/3]], ref[mid[2*len(mid)/3]]
	file := segPath(dir, crcBad.seg, kafkalog.LogSuffix)
	patch(t, file, crcBad.b.Position+batch.HeaderSize+3, crcBad.raw[batch.HeaderSize+3]^0xff)
	patch(t, file, magicBad.b.Position+16, 9)

	for _, scanned := range []bool{false, true} {
		p := mustOpen(t, dir, Options{})
		if scanned {
			if _, err := p.Offsets(); err != nil {
				t.Fatalf("Offsets with a corrupt rolled segment: %v", err)
			}
		}
		_, err := p.Read(crcBad.b.BaseOffset, 1<<20, 1<<40)
		assertCorruptIn(t, err, file)
		_, err = p.Read(magicBad.b.BaseOffset, 1<<20, 1<<40)
		assertCorruptIn(t, err, file)
		start := ref[mid[0]]
		data, err := p.Read(start.b.BaseOffset, 1<<30, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		if got := lastOffsets(t, data); got[len(got)-1] != crcBad.b.BaseOffset-1 {
			t.Fatalf("read before the bad entry ends at %d, want %d", got[len(got)-1], crcBad.b.BaseOffset-1)
		}
		if _, _, _, err := p.MaxTimestamp(1 << 40); !errors.Is(err, kafkalog.ErrCorrupt) {
			t.Fatalf("MaxTimestamp over a segment whose scan stopped at corruption: %v", err)
		}
	}

	// The active segment: a bad CRC below the broker's high watermark is
	// corruption; without one it ends the served log.
	last := ref[len(ref)-3]
	active := segPath(dir, last.seg, kafkalog.LogSuffix)
	patch(t, active, last.b.Position+batch.HeaderSize+3, last.raw[batch.HeaderSize+3]^0xff)
	end := ref[len(ref)-1].b.LastOffset + 1
	p := mustOpen(t, dir, Options{HighWatermark: func() (int64, bool) { return end, true }})
	if o := mustOffsets(t, p); o.HighWatermark != end {
		t.Fatalf("Offsets = %+v, want HW %d", o, end)
	}
	_, err := p.Read(last.b.BaseOffset, 1, 1<<40)
	assertCorruptIn(t, err, active)
	q := mustOpen(t, dir, Options{})
	if o := mustOffsets(t, q); o.HighWatermark != last.b.BaseOffset {
		t.Fatalf("Offsets = %+v, want HW %d (the bad entry)", o, last.b.BaseOffset)
	}
	if data, err := q.Read(last.b.BaseOffset, 1<<20, 1<<40); err != nil || len(data) != 0 {
		t.Fatalf("Read at the served end: %d bytes, %v", len(data), err)
	}
}

// TestBadIndex replaces a rolled segment's .index and .timeindex with
// truncated, garbage and misleading ones: every read and timestamp search
// still gives what the log holds.
func TestBadIndex(t *testing.T) {
	l, dir := newSeglog(t)
	appendBatches(t, l, rand.New(rand.NewSource(6)), 120, 6, 80)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ref := reference(t, dir)
	idxPath := segPath(dir, 0, kafkalog.IndexSuffix)
	tidxPath := segPath(dir, 0, kafkalog.TimeIndexSuffix)
	good, err := os.ReadFile(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	goodT, err := os.ReadFile(tidxPath)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := index.ParseOffsetIndex(good, 0)
	if err != nil || len(entries) < 10 {
		t.Fatalf("seglog's index: %d entries, %v", len(entries), err)
	}
	rng := rand.New(rand.NewSource(7))
	garbage := make([]byte, len(good))
	rng.Read(garbage)
	reencode := func(f func(e index.OffsetEntry) index.OffsetEntry) []byte {
		var out []byte
		for _, e := range entries {
			e = f(e)
			out = binary.BigEndian.AppendUint32(out, uint32(e.Offset))
			out = binary.BigEndian.AppendUint32(out, uint32(e.Position))
		}
		return out
	}
	lastEnt := ref[firstEntryFrom(ref, entries[len(entries)-1].Offset)]
	variants := map[string]struct{ idx, tidx []byte }{
		"truncated":        {good[:len(good)-3], goodT[:len(goodT)-5]},
		"garbage":          {garbage, garbage[:len(goodT)/12*12]},
		"off a boundary":   {reencode(func(e index.OffsetEntry) index.OffsetEntry { e.Position += 7; return e }), goodT},
		"offsets too low":  {reencode(func(e index.OffsetEntry) index.OffsetEntry { e.Offset -= 5; e.Position += 0; return e }), goodT},
		"offsets too high": {reencode(func(e index.OffsetEntry) index.OffsetEntry { e.Offset += 40; return e }), goodT},
		"past the end":     {binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), uint32(lastEnt.b.End()+8)), nil},
		"zeros":            {make([]byte, 1<<16), make([]byte, 1<<16)},
		"empty":            {nil, nil},
	}
	recs := records(t, ref)
	for name, v := range variants {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(idxPath, v.idx, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(tidxPath, v.tidx, 0o644); err != nil {
				t.Fatal(err)
			}
			p := mustOpen(t, dir, Options{})
			o := Offsets{HighWatermark: ref[len(ref)-1].b.LastOffset + 1}
			for i := 0; i < len(recs); i += 3 {
				r := recs[i]
				data, err := p.Read(r.offset, 1, o.HighWatermark)
				if err != nil {
					t.Fatalf("Read(%d): %v", r.offset, err)
				}
				equalBytes(t, "read at a record offset", data, ref[r.entry].raw)
			}
			q := mustOpen(t, dir, Options{})
			checkOffsetForTimestamp(t, q, recs, o, 15)
			equalBytes(t, "sequential read", readAll(t, q, 0, 5000), concat(ref))
		})
	}
}

// TestTails covers the ends of segments: zero bytes after the last entry
// (preallocation) end a segment, active or rolled; anything else after a
// rolled segment's last entry is corruption.
func TestTails(t *testing.T) {
	dir := partitionDir(t)
	writeSegment(t, dir, 0, ent{base: 0, n: 2}, ent{base: 2, n: 2})
	appendRaw(t, segPath(dir, 0, kafkalog.LogSuffix), make([]byte, 4096))
	writeSegment(t, dir, 10, ent{base: 10, n: 2})
	appendRaw(t, segPath(dir, 10, kafkalog.LogSuffix), make([]byte, 4096))
	p := mustOpen(t, dir, Options{})
	if o := mustOffsets(t, p); o != (Offsets{0, 12, 12}) {
		t.Fatalf("Offsets = %+v", o)
	}
	expectLast := func(p *Partition, offset int64, want ...int64) {
		t.Helper()
		data, err := p.Read(offset, 1<<20, 1<<40)
		if err != nil {
			t.Fatalf("Read(%d): %v", offset, err)
		}
		if got := lastOffsets(t, data); len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) {
			t.Fatalf("Read(%d) = %v, want %v", offset, got, want)
		}
	}
	expectLast(p, 4, 11) // past the zeros into the next segment
	expectLast(p, 0, 1, 3)
	expectLast(p, 4, 11) // again, from where the previous read ended
	expectLast(p, 12)
	// A new active segment: segment 10 with its zeros is rolled now.
	writeSegment(t, dir, 12, ent{base: 12, n: 1})
	expectLast(p, 12, 12)
	if o := mustOffsets(t, p); o != (Offsets{0, 13, 13}) {
		t.Fatalf("Offsets = %+v", o)
	}
	expectLast(p, 11, 11)
	// Garbage after a rolled segment's last entry.
	patch(t, segPath(dir, 10, kafkalog.LogSuffix), int64(len(ent{base: 10, n: 2}.encode(t)))+100, 1)
	q := mustOpen(t, dir, Options{})
	_, err := q.Read(12, 1<<20, 1<<40) // not affected: another segment
	if err != nil {
		t.Fatal(err)
	}
	// Offset 11 is served (it precedes the garbage); the garbage is found
	// by a read that needs to walk through it.
	if err := os.Remove(segPath(dir, 12, kafkalog.LogSuffix)); err != nil {
		t.Fatal(err)
	}
	writeSegment(t, dir, 20, ent{base: 20, n: 1})
	q = mustOpen(t, dir, Options{})
	_, err = q.Read(15, 1<<20, 1<<40)
	assertCorruptIn(t, err, segPath(dir, 10, kafkalog.LogSuffix))
}

// TestCompactedGaps reads offsets that compaction removed, inside a
// segment, at a segment's end and at its start: each reads from the next
// entry. A log cleaner swap in progress between two segments makes such a
// read list again and then report ErrSegmentGone rather than skip data.
func TestCompactedGaps(t *testing.T) {
	dir := partitionDir(t)
	writeSegment(t, dir, 0, ent{base: 0, n: 3}, ent{base: 10, n: 3})
	writeSegment(t, dir, 20, ent{base: 25, n: 3})
	writeSegment(t, dir, 40, ent{base: 40, n: 2})
	p := mustOpen(t, dir, Options{})
	for _, c := range []struct{ offset, first int64 }{{5, 10}, {13, 25}, {20, 25}, {30, 40}, {41, 40}} {
		data, err := p.Read(c.offset, 1, 1<<40)
		if err != nil {
			t.Fatalf("Read(%d): %v", c.offset, err)
		}
		if ents := parseEntries(t, data); len(ents) != 1 || ents[0].BaseOffset != c.first {
			t.Fatalf("Read(%d): %d entries, want the one at %d", c.offset, len(ents), c.first)
		}
	}
	swap := segPath(dir, 15, kafkalog.LogSuffix) + kafkalog.SwapSuffix
	if err := os.WriteFile(swap, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Read(13, 1, 1<<40); !errors.Is(err, ErrSegmentGone) {
		t.Fatalf("Read across a swap in progress: %v, want ErrSegmentGone", err)
	}
	if err := os.Remove(swap); err != nil {
		t.Fatal(err)
	}
	if data, err := p.Read(13, 1, 1<<40); err != nil || parseEntries(t, data)[0].BaseOffset != 25 {
		t.Fatalf("Read(13) after the swap: %v", err)
	}
	t.Run("reference", func(t *testing.T) { checkFixture(t, dir) })
}

// TestEmptyDir: a directory without segments serves nothing.
func TestEmptyDir(t *testing.T) {
	p := mustOpen(t, partitionDir(t), Options{})
	if o := mustOffsets(t, p); o != (Offsets{}) {
		t.Fatalf("Offsets = %+v", o)
	}
	if data, err := p.Read(0, 1, 1<<40); err != nil || len(data) != 0 {
		t.Fatalf("Read(0) = %d bytes, %v", len(data), err)
	}
	var oor *OffsetOutOfRangeError
	if _, err := p.Read(1, 1, 1<<40); !errors.As(err, &oor) {
		t.Fatalf("Read(1): %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Read(0, 1, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}
