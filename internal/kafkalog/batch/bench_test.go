package batch

import (
	"bytes"
	"io"
	"testing"
)

// benchSegment is n bytes of v2 batches of 16 records of 1 KiB values,
// uncompressed, like the bench's partitions.
func benchSegment(b *testing.B, n int) []byte {
	b.Helper()
	var seg []byte
	recs := make([]Record, 16)
	val := bytes.Repeat([]byte("tierd"), 205)
	for off := int64(0); len(seg) < n; off += 16 {
		for i := range recs {
			recs[i] = Record{Offset: off + int64(i), Timestamp: 1_700_000_000_000 + off, Value: val}
		}
		var err error
		if seg, err = AppendBatch(seg, NewParams(off, 0), recs, nil); err != nil {
			b.Fatal(err)
		}
	}
	return seg
}

// BenchmarkScan walks the batch headers of a 4 MiB segment, as a fetch
// does; BenchmarkScanBaseline reads the same bytes with one copy, the
// least a reader of them can do.
func BenchmarkScan(b *testing.B) {
	seg := benchSegment(b, 4<<20)
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s := NewScanner(bytes.NewReader(seg), int64(len(seg)), ScanOptions{})
		for s.Next() {
		}
		if s.Err() != nil {
			b.Fatal(s.Err())
		}
	}
}

// BenchmarkScanCRC is BenchmarkScan with every batch's CRC checked, as
// the copier does before a copy.
func BenchmarkScanCRC(b *testing.B) {
	seg := benchSegment(b, 4<<20)
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s := NewScanner(bytes.NewReader(seg), int64(len(seg)), ScanOptions{VerifyCRC: true})
		for s.Next() {
			if !s.CRCValid() {
				b.Fatal("crc")
			}
		}
	}
}

func BenchmarkScanBaseline(b *testing.B) {
	seg := benchSegment(b, 4<<20)
	buf := make([]byte, DefaultScanBuffer)
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := bytes.NewReader(seg)
		for off := int64(0); off < int64(len(seg)); off += int64(len(buf)) {
			if _, err := r.ReadAt(buf, off); err != nil && err != io.EOF {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkParseHeader parses one v2 batch header in place (the fetch
// path's per-batch work).
func BenchmarkParseHeader(b *testing.B) {
	seg := benchSegment(b, 64<<10)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseHeader(seg, 0); err != nil {
			b.Fatal(err)
		}
	}
}
