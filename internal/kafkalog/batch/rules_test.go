package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// rawBatch builds an uncompressed v2 batch whose header and record offset
// deltas are given, as a compacted log holds them (AppendBatch only writes
// deltas 0..n-1). The CRC is valid.
func rawBatch(base int64, lastDelta int32, count int32, deltas []int64) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint64(b, uint64(base))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0) // leader epoch
	b = append(b, 2)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(lastDelta))
	b = binary.BigEndian.AppendUint64(b, 1000)
	b = binary.BigEndian.AppendUint64(b, 1000)
	b = binary.BigEndian.AppendUint64(b, ^uint64(0))
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	b = binary.BigEndian.AppendUint32(b, uint32(count))
	for _, d := range deltas {
		b = appendRecord(b, Record{Value: []byte("v")}, 0, d)
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[v2CRCStart:], castagnoli))
	return b
}

func wantCorrupt(t *testing.T, err error, pos int64, reason string) {
	t.Helper()
	var ce *kafkalog.CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Fatalf("want a corruption error at %d, got %v", pos, err)
	}
	if ce.Position != pos || !strings.Contains(ce.Reason, reason) {
		t.Fatalf("corruption at %d (%q), want %d containing %q", ce.Position, ce.Reason, pos, reason)
	}
}

func header(t *testing.T, raw []byte, pos int64) Batch {
	t.Helper()
	b, err := ParseHeader(raw, pos)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckRecords(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lastDelta int32
		count     int32
		deltas    []int64
		reason    string // "" for valid
	}{
		{"as produced", 2, 3, []int64{0, 1, 2}, ""},
		{"compacted: records removed, last offset delta kept", 9, 2, []int64{3, 9}, ""},
		{"compacted to empty", 4, 0, nil, ""},
		{"offset deltas not increasing", 2, 3, []int64{0, 1, 1}, "offset delta 1, want above 1"},
		{"offset delta past the last offset delta", 2, 3, []int64{0, 1, 3}, "at most the last offset delta 2"},
		{"count above the records", 5, 4, []int64{0, 1, 2}, "counts 4 records but ends after 3"},
		{"count below the records", 5, 2, []int64{0, 1, 2}, "bytes after the 2 records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := rawBatch(100, tc.lastDelta, tc.count, tc.deltas)
			b := header(t, raw, 1000)
			err := b.CheckRecords(raw)
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *kafkalog.CorruptionError
			if !errors.As(err, &ce) || ce.Position < 1000+57 || ce.Position >= b.End() || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("got %v, want a corruption inside the records containing %q", err, tc.reason)
			}
		})
	}
	// A record length that runs past the batch end.
	raw := rawBatch(100, 0, 1, []int64{0})
	raw[HeaderSize] = 0x7e // zigzag 63
	b := header(t, raw, 1000)
	wantCorrupt(t, b.CheckRecords(raw), 1000+HeaderSize, "length 63 runs past the batch end")
	// Compressed and legacy entries are not opened.
	p := NewParams(0, 0)
	p.Codec = CodecGzip
	gz, err := AppendBatch(nil, p, []Record{{Timestamp: 1, Value: []byte("v")}}, Stdlib)
	if err != nil {
		t.Fatal(err)
	}
	gz[len(gz)-3] ^= 0xff
	b = header(t, gz, 0)
	if err := b.CheckRecords(gz); err != nil {
		t.Fatalf("compressed: %v", err)
	}
}

func TestChecker(t *testing.T) {
	var log []byte
	var pos []int64
	for i := int64(0); i < 4; i++ {
		pos = append(pos, int64(len(log)))
		var err error
		if log, err = AppendBatch(log, NewParams(10+2*i, 3), []Record{{Timestamp: 1, Value: []byte("a")}, {Timestamp: 2, Value: []byte("b")}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets 10..17 in a segment [10, 17].
	check := func(data []byte, base, end int64) error {
		c := NewChecker(base, end)
		s := NewScanner(bytes.NewReader(data), int64(len(data)), ScanOptions{VerifyCRC: true})
		for s.Next() {
			if !s.CRCValid() {
				return errors.New("CRC")
			}
			if err := c.Check(s.Batch()); err != nil {
				return err
			}
			if err := s.CheckRecords(); err != nil {
				return err
			}
		}
		return s.Err()
	}
	if err := check(log, 10, 17); err != nil {
		t.Fatal(err)
	}
	if err := check(log, 10, -1); err != nil {
		t.Fatal(err)
	}
	setBase := func(i int, off int64) []byte {
		bad := bytes.Clone(log)
		binary.BigEndian.PutUint64(bad[pos[i]:], uint64(off))
		return bad
	}
	// The base offset is outside the CRC: each change keeps the CRC valid.
	wantCorrupt(t, check(setBase(2, 13), 10, 17), pos[2], "offset 13 is not after the previous entry's last offset 13")
	wantCorrupt(t, check(setBase(2, 5), 10, 17), pos[2], "not after")
	wantCorrupt(t, check(setBase(0, 9), 10, 17), pos[0], "below the segment's base offset 10")
	wantCorrupt(t, check(setBase(3, 17), 10, 17), pos[3], "ends at offset 18, past the segment's last offset 17")
	wantCorrupt(t, check(log, 10, 16), pos[3], "the next segment starts at 17")
	// A gap is fine (compaction, transactions aborted and cleaned).
	if err := check(setBase(3, 40), 10, -1); err != nil {
		t.Fatalf("gap: %v", err)
	}
	bad := bytes.Clone(log)
	binary.BigEndian.PutUint32(bad[pos[1]+12:], uint32(0xfffffffe)) // epoch -2
	wantCorrupt(t, check(bad, 10, 17), pos[1]+12, "partition leader epoch -2")
	binary.BigEndian.PutUint32(bad[pos[1]+12:], uint32(0xffffffff)) // -1: none
	if err := check(bad, 10, 17); err != nil {
		t.Fatalf("epoch -1: %v", err)
	}
	// More records than offsets, inside the CRC: refused from the header.
	more := rawBatch(10, 1, 3, []int64{0, 1, 2})
	c := NewChecker(10, -1)
	wantCorrupt(t, c.Check(header(t, more, 0)), 57, "holds 3 records, more than its 2 offsets")
}

func TestCheckerLegacy(t *testing.T) {
	// Magic 1 messages: the offset rules apply to the message offset.
	msg := func(off int64) []byte {
		m := binary.BigEndian.AppendUint64(nil, uint64(off))
		m = binary.BigEndian.AppendUint32(m, 0)
		m = binary.BigEndian.AppendUint32(m, 0)
		m = append(m, 1, 0)
		m = binary.BigEndian.AppendUint64(m, 5)
		m = binary.BigEndian.AppendUint32(m, 0xffffffff)
		m = binary.BigEndian.AppendUint32(m, 1)
		m = append(m, 'x')
		binary.BigEndian.PutUint32(m[8:], uint32(len(m)-LogOverhead))
		binary.BigEndian.PutUint32(m[12:], crc32.ChecksumIEEE(m[legacyCRCFrom:]))
		return m
	}
	c := NewChecker(3, 9)
	for i, off := range []int64{3, 4, 7} {
		b := header(t, msg(off), int64(i*30))
		if err := c.Check(b); err != nil {
			t.Fatal(err)
		}
		if err := b.CheckRecords(msg(off)); err != nil {
			t.Fatal(err)
		}
	}
	wantCorrupt(t, c.Check(header(t, msg(7), 90)), 90, "message at offset 7 is not after")
}

func TestFirstNonZero(t *testing.T) {
	data := make([]byte, 200_000)
	if p, err := FirstNonZero(bytes.NewReader(data), 5, int64(len(data))); err != nil || p != -1 {
		t.Fatalf("all zero: %d %v", p, err)
	}
	for _, at := range []int{5, 65_540, 199_999} {
		d := bytes.Clone(data)
		d[at] = 1
		if p, err := FirstNonZero(bytes.NewReader(d), 5, int64(len(d))); err != nil || p != int64(at) {
			t.Fatalf("byte at %d: %d %v", at, p, err)
		}
	}
	d := bytes.Clone(data)
	d[3] = 1
	if p, _ := FirstNonZero(bytes.NewReader(d), 5, int64(len(d))); p != -1 {
		t.Fatalf("a byte before from counted: %d", p)
	}
	if _, err := FirstNonZero(bytes.NewReader(data[:10]), 5, 20); err == nil {
		t.Fatal("short read not reported")
	}
}

// TestFixturesKeepTheRules: every real broker log passes the checks, each
// bounded by the next segment of its directory.
func TestFixturesKeepTheRules(t *testing.T) {
	root := testfixtures.Dir(t)
	logs := map[string][]int64{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if f, ok := kafkalog.ParseFileName(d.Name()); ok && f.Live && f.Suffix == kafkalog.LogSuffix {
			logs[filepath.Dir(p)] = append(logs[filepath.Dir(p)], f.BaseOffset)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked, records := 0, 0
	for dir, bases := range logs {
		sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
		for i, base := range bases {
			end := int64(-1)
			if i+1 < len(bases) {
				end = bases[i+1] - 1
			}
			p := filepath.Join(dir, kafkalog.FileName(base, kafkalog.LogSuffix))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			c := NewChecker(base, end)
			s := NewScanner(bytes.NewReader(data), int64(len(data)), ScanOptions{VerifyCRC: true, BufferSize: 4096})
			for s.Next() {
				b := s.Batch()
				if err := c.Check(b); err != nil {
					t.Errorf("%s: %v", p, err)
					break
				}
				if err := s.CheckRecords(); err != nil {
					t.Errorf("%s: %v", p, err)
					break
				}
				if b.Magic == 2 && b.Codec == CodecNone {
					records += int(b.Count)
				}
			}
			if s.Err() != nil {
				t.Errorf("%s: %v", p, s.Err())
			}
			checked++
		}
	}
	if checked < 30 || records < 30_000 {
		t.Fatalf("checked %d logs, %d uncompressed v2 records: the fixtures are not all there", checked, records)
	}
}

// FuzzCheckRecords: CheckRecords never panics on arbitrary bytes, and an
// uncompressed v2 batch it accepts decodes (through Records) to exactly
// Count records whose offsets strictly increase within [BaseOffset,
// LastOffset].
func FuzzCheckRecords(f *testing.F) {
	f.Add(rawBatch(100, 2, 3, []int64{0, 1, 2}))
	f.Add(rawBatch(7, 9, 2, []int64{3, 9}))
	f.Add(rawBatch(0, 4, 0, nil))
	f.Add(rawBatch(0, 2, 3, []int64{0, 2, 1}))
	one, err := AppendBatch(nil, NewParams(5, 1), []Record{{Timestamp: 9, Key: []byte("k"), Value: []byte("v"),
		Headers: []RecordHeader{{Key: "h", Value: []byte("hv")}, {Key: "", Value: nil}}}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(one)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseHeader(data, 0)
		if err != nil || int(b.Size) != len(data) {
			return
		}
		if err := b.CheckRecords(data); err != nil {
			if !errors.Is(err, kafkalog.ErrCorrupt) {
				t.Fatalf("not a corruption error: %v", err)
			}
			return
		}
		if b.Magic != 2 || b.Codec != CodecNone {
			return
		}
		recs, err := Records(data, nil)
		if err != nil {
			t.Fatalf("CheckRecords accepted what Records refuses: %v", err)
		}
		if len(recs) != int(b.Count) {
			t.Fatalf("%d records, count %d", len(recs), b.Count)
		}
		prev := b.BaseOffset - 1
		for _, r := range recs {
			if r.Offset <= prev || r.Offset > b.LastOffset {
				t.Fatalf("offset %d after %d, batch %d..%d", r.Offset, prev, b.BaseOffset, b.LastOffset)
			}
			prev = r.Offset
		}
	})
}
