package segcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// segment is a synthetic rolled segment: its log and the indexes a broker
// would have written for it.
type segment struct {
	log, offsets, times []byte
	starts              []int64 // each batch's byte position
}

// build makes a segment of n one-record batches from offset base, batch i
// at timestamp ts[i] with a value of valueSize bytes, and its indexes by
// Kafka's rule at intervalBytes.
func build(t *testing.T, base int64, ts []int64, valueSize int, intervalBytes int64) segment {
	t.Helper()
	var s segment
	b := index.NewBuilder(base, intervalBytes)
	for i, tsi := range ts {
		pos := int64(len(s.log))
		var err error
		s.log, err = batch.AppendBatch(s.log, batch.NewParams(base+int64(i), 0), []batch.Record{{Timestamp: tsi, Value: bytes.Repeat([]byte{'v'}, valueSize)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.starts = append(s.starts, pos)
		b.Add(base+int64(i), tsi, pos, int32(int64(len(s.log))-pos))
	}
	b.Seal()
	var err error
	if s.offsets, s.times, err = b.Encode(base); err != nil {
		t.Fatal(err)
	}
	return s
}

// input is the Input of a segment at base 100 bounded by [100, 199].
func (s segment) input() Input {
	return Input{Name: "/data/t-0/00000000000000000100.log", Base: 100, End: 199, Log: bytes.NewReader(s.log), LogSize: int64(len(s.log)),
		OffsetIndex: s.offsets, TimeIndex: s.times, IndexIntervalBytes: 100}
}

// recrc recomputes the CRC-32C of the v2 batch at pos (after a change
// the CRC covers, so that only the other checks can catch it).
func recrc(log []byte, pos int64) {
	size := int64(binary.BigEndian.Uint32(log[pos+8:])) + 12
	sum := crc32.Checksum(log[pos+21:pos+size], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(log[pos+17:], sum)
}

func ts(n int, from int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// TestInspect: what Inspect makes of segments that pass, of segments
// with unusable indexes (a result, not an error), and of corrupt logs
// (ErrCorruptSegment with the file and byte).
func TestInspect(t *testing.T) {
	const base = 100
	clean := build(t, base, ts(20, 1_700_000_000_000), 50, 100)
	if len(clean.offsets) < 3*index.OffsetEntrySize || len(clean.times) < 3*index.TimeEntrySize {
		t.Fatalf("too few index entries to test with: %d, %d bytes", len(clean.offsets), len(clean.times))
	}
	cp := func(b []byte) []byte { return append([]byte{}, b...) }
	for _, tc := range []struct {
		name    string
		edit    func(in *Input, log []byte) []byte // returns the log to use
		size    int64                              // want Result.Size; -1: the whole log
		problem string                             // want IndexProblem to contain it; "": indexes OK
		corrupt int64                              // want a corruption at this byte; -1: none
		reason  string                             // and its reason to contain this
	}{
		{name: "clean", size: -1, corrupt: -1},
		{name: "zero tail of a preallocated .log", edit: func(in *Input, log []byte) []byte {
			return append(log, make([]byte, 4096)...)
		}, size: int64(len(clean.log)), corrupt: -1},
		{name: "preallocated indexes: zero padding after the real entries", edit: func(in *Input, log []byte) []byte {
			in.OffsetIndex = append(cp(in.OffsetIndex), make([]byte, 8*1024)...)
			in.TimeIndex = append(cp(in.TimeIndex), make([]byte, 12*1024)...)
			return log
		}, size: -1, corrupt: -1},
		{name: "empty log, empty indexes", edit: func(in *Input, log []byte) []byte {
			in.OffsetIndex, in.TimeIndex = []byte{}, []byte{}
			return nil
		}, size: 0, corrupt: -1},
		{name: "no offset index", edit: func(in *Input, log []byte) []byte {
			in.OffsetIndex = nil
			return log
		}, size: -1, problem: "offset index unreadable: no offset index", corrupt: -1},
		{name: "no time index", edit: func(in *Input, log []byte) []byte {
			in.TimeIndex = nil
			return log
		}, size: -1, problem: "time index unreadable: no time index", corrupt: -1},
		{name: "offset index not readable", edit: func(in *Input, log []byte) []byte {
			in.OffsetIndexErr = errors.New("permission denied")
			return log
		}, size: -1, problem: "offset index unreadable: permission denied", corrupt: -1},
		{name: "time index not readable", edit: func(in *Input, log []byte) []byte {
			in.TimeIndexErr = errors.New("input/output error")
			return log
		}, size: -1, problem: "time index unreadable: input/output error", corrupt: -1},
		{name: "offset index entry off a batch boundary", edit: func(in *Input, log []byte) []byte {
			in.OffsetIndex = cp(in.OffsetIndex)
			p := binary.BigEndian.Uint32(in.OffsetIndex[index.OffsetEntrySize+4:])
			binary.BigEndian.PutUint32(in.OffsetIndex[index.OffsetEntrySize+4:], p+1)
			return log
		}, size: -1, problem: "not at the start of a batch", corrupt: -1},
		{name: "offset index entry naming an earlier batch's offset", edit: func(in *Input, log []byte) []byte {
			in.OffsetIndex = cp(in.OffsetIndex)
			// The first entry, at the second batch, names the first batch's offset.
			rel := binary.BigEndian.Uint32(in.OffsetIndex)
			binary.BigEndian.PutUint32(in.OffsetIndex, rel-1)
			return log
		}, size: -1, problem: "not after the previous batch's last offset", corrupt: -1},
		{name: "offset index positions out of order", edit: func(in *Input, log []byte) []byte {
			in.OffsetIndex = cp(in.OffsetIndex)
			e0, e1 := cp(in.OffsetIndex[:8]), cp(in.OffsetIndex[8:16])
			copy(in.OffsetIndex[:8], e1)
			copy(in.OffsetIndex[8:16], e0)
			return log
		}, size: -1, problem: "offset index unreadable", corrupt: -1},
		{name: "offset index entries past the last batch", edit: func(in *Input, log []byte) []byte {
			in.OffsetIndex, _ = index.AppendOffsetEntry(cp(in.OffsetIndex), base, index.OffsetEntry{Offset: base + 25, Position: int32(len(log) + 100)})
			return log
		}, size: -1, problem: "after the start of the log's last batch", corrupt: -1},
		{name: "time index timestamp below the log's largest", edit: func(in *Input, log []byte) []byte {
			in.TimeIndex = cp(in.TimeIndex)
			ts := int64(binary.BigEndian.Uint64(in.TimeIndex))
			binary.BigEndian.PutUint64(in.TimeIndex, uint64(ts-5))
			return log
		}, size: -1, problem: "below the log's largest timestamp", corrupt: -1},
		{name: "time index entries past the last offset", edit: func(in *Input, log []byte) []byte {
			in.TimeIndex, _ = index.AppendTimeEntry(cp(in.TimeIndex), base, index.TimeEntry{Timestamp: 1_800_000_000_000, Offset: base + 50})
			return log
		}, size: -1, problem: "time index has 1 entries for offsets past the log's last offset 119", corrupt: -1},
		{name: "record byte changed: CRC mismatch", edit: func(in *Input, log []byte) []byte {
			log[clean.starts[7]+70] ^= 1
			return log
		}, corrupt: clean.starts[7], reason: "CRC mismatch"},
		{name: "non-zero byte after the last batch", edit: func(in *Input, log []byte) []byte {
			tail := make([]byte, 100)
			tail[60] = 1
			return append(log, tail...)
		}, corrupt: int64(len(clean.log)) + 8, reason: "the last whole batch ends at byte " + strconv.Itoa(len(clean.log)) + " and the first non-zero byte after it is at byte " + strconv.Itoa(len(clean.log)+60)},
		{name: "offset below the base offset", edit: func(in *Input, log []byte) []byte {
			in.Base = base + 1
			return log
		}, corrupt: 0, reason: "below the segment's base offset 101"},
		{name: "offset past the segment's last offset", edit: func(in *Input, log []byte) []byte {
			in.End = base + 10
			return log
		}, corrupt: clean.starts[11], reason: "past the segment's last offset 110"},
		{name: "offsets not increasing (base offset, outside the CRC)", edit: func(in *Input, log []byte) []byte {
			binary.BigEndian.PutUint64(log[clean.starts[5]:], uint64(base+2))
			return log
		}, corrupt: clean.starts[5], reason: "not after the previous entry's last offset 104"},
		{name: "records do not match the header (CRC recomputed)", edit: func(in *Input, log []byte) []byte {
			binary.BigEndian.PutUint32(log[clean.starts[3]+57:], 0) // record count 0, one record there
			recrc(log, clean.starts[3])
			return log
		}, corrupt: clean.starts[3] + 61, reason: "record"},
		{name: "offset more than 2^31-1 past the base offset, nothing bounding the segment", edit: func(in *Input, log []byte) []byte {
			in.End = -1
			binary.BigEndian.PutUint64(log[clean.starts[19]:], uint64(base)+math.MaxInt32+1) // outside the CRC
			return log
		}, corrupt: clean.starts[19], reason: "more than 2147483647 past the segment's base offset 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := clean.input()
			log := cp(clean.log)
			if tc.edit != nil {
				log = tc.edit(&in, log)
			}
			in.Log, in.LogSize = bytes.NewReader(log), int64(len(log))
			res, err := Inspect(in)
			if tc.corrupt >= 0 {
				var ce *kafkalog.CorruptionError
				if !errors.Is(err, ErrCorruptSegment) || !errors.Is(err, kafkalog.ErrCorrupt) || !errors.As(err, &ce) {
					t.Fatalf("Inspect = %v; want ErrCorruptSegment with a CorruptionError", err)
				}
				if ce.File != in.Name || ce.Position != tc.corrupt || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("Inspect = %v (in %s at byte %d); want %s at byte %d, %q", err, ce.File, ce.Position, in.Name, tc.corrupt, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.size
			if want < 0 {
				want = int64(len(log))
			}
			if res.Size != want || res.FileSize != int64(len(log)) {
				t.Errorf("size %d of %d, want %d of %d", res.Size, res.FileSize, want, len(log))
			}
			if tc.problem == "" && (!res.IndexesOK || res.IndexProblem != "") {
				t.Errorf("indexes refused: %s", res.IndexProblem)
			}
			if tc.problem != "" && (res.IndexesOK || !strings.Contains(res.IndexProblem, tc.problem)) {
				t.Errorf("indexes OK %v, problem %q; want a problem with %q", res.IndexesOK, res.IndexProblem, tc.problem)
			}
			// Whatever the given indexes, the rebuilt ones are the
			// broker's (the clean segment's) for the same batches.
			offs, times, err := res.Rebuilt.Encode(in.Base)
			if err != nil {
				t.Fatal(err)
			}
			if res.Size == int64(len(clean.log)) && (!bytes.Equal(offs, clean.offsets) || !bytes.Equal(times, clean.times)) {
				t.Errorf("rebuilt indexes %v / %v differ from the broker's", res.Rebuilt.Offsets, res.Rebuilt.Times)
			}
			wantTS := int64(batch.NoTimestamp)
			if res.Size > 0 {
				wantTS = 1_700_000_000_019
			}
			if res.MaxTimestamp != wantTS {
				t.Errorf("max timestamp %d, want %d", res.MaxTimestamp, wantTS)
			}
		})
	}
}

// TestInspectTimestampZero: records with timestamp 0 at the base offset
// give the broker's time index a first entry of zero bytes, (0, base): a
// real entry, not padding, so the broker's indexes are usable as they
// are.
func TestInspectTimestampZero(t *testing.T) {
	s := build(t, 100, []int64{0, 0, 0, 5, 6, 7, 8, 9, 10, 11}, 50, 100)
	if len(s.times) < 2*index.TimeEntrySize || !bytes.Equal(s.times[:index.TimeEntrySize], make([]byte, index.TimeEntrySize)) {
		t.Fatalf("the broker's time index %x does not start with (0, base)", s.times)
	}
	res, err := Inspect(s.input())
	if err != nil || !res.IndexesOK {
		t.Fatalf("Inspect: %v, indexes OK %v (%s)", err, res.IndexesOK, res.IndexProblem)
	}
}

// failingReader fails every read at or past byte from.
type failingReader struct {
	r    io.ReaderAt
	from int64
}

var errDisk = errors.New("input/output error")

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.from {
		return 0, errDisk
	}
	return f.r.ReadAt(p, off)
}

// TestInspectErrors: a read error of the log is returned as it is (not
// as corruption: the bytes were never seen), and a bad Input is refused.
func TestInspectErrors(t *testing.T) {
	s := build(t, 100, ts(20, 1_700_000_000_000), 50, 100)
	in := s.input()
	in.Log = failingReader{r: bytes.NewReader(s.log), from: s.starts[10]}
	if _, err := Inspect(in); !errors.Is(err, errDisk) || errors.Is(err, ErrCorruptSegment) || errors.Is(err, kafkalog.ErrCorrupt) {
		t.Errorf("a failing read: %v; want the read error, not corruption", err)
	}
	in = s.input()
	in.Log = nil
	if _, err := Inspect(in); err == nil || errors.Is(err, ErrCorruptSegment) {
		t.Errorf("no log: %v", err)
	}
	in = s.input()
	in.Base = -1
	if _, err := Inspect(in); err == nil || errors.Is(err, ErrCorruptSegment) {
		t.Errorf("a negative base offset: %v", err)
	}
}
