package locallog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// refEntry is one entry as package batch's own scan of the files gives it.
type refEntry struct {
	b   batch.Batch
	raw []byte
	seg int64 // base offset of its segment
}

// reference scans every live .log of dir in base order with batch.Scanner
// (CRC verified), as the truth locallog is compared with.
func reference(t testing.TB, dir string) []refEntry {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, e := range ents {
		if f, ok := kafkalog.ParseFileName(e.Name()); ok && f.Live && f.Suffix == kafkalog.LogSuffix {
			bases = append(bases, f.BaseOffset)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var out []refEntry
	for _, base := range bases {
		path := filepath.Join(dir, kafkalog.FileName(base, kafkalog.LogSuffix))
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		s := batch.NewScanner(f, st.Size(), batch.ScanOptions{VerifyCRC: true})
		for s.Next() {
			if !s.CRCValid() {
				t.Fatalf("%s: reference scan: CRC mismatch at %d", path, s.Batch().Position)
			}
			raw, err := s.Raw()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, refEntry{b: s.Batch(), raw: raw, seg: base})
		}
		if err := s.Err(); err != nil {
			if nz, _ := batch.FirstNonZero(f, s.ValidEnd(), st.Size()); nz >= 0 {
				t.Fatalf("%s: reference scan: %v", path, err)
			}
		}
		f.Close()
	}
	return out
}

// parseEntries splits Read's answer into entries, failing on anything that
// is not whole, CRC-valid entries.
func parseEntries(t testing.TB, data []byte) []batch.Batch {
	t.Helper()
	var out []batch.Batch
	for pos := 0; pos < len(data); {
		b, err := parseServed(data[pos:], int64(pos))
		if err != nil {
			t.Fatalf("entry at byte %d of a %d-byte answer: %v", pos, len(data), err)
		}
		if !batch.CheckCRC(data[pos : pos+int(b.Size)]) {
			t.Fatalf("entry at byte %d of the answer: CRC mismatch", pos)
		}
		out = append(out, b)
		pos += int(b.Size)
	}
	return out
}

// readAll reads from offset to the high watermark with maxBytes per call
// and returns the concatenated answers.
func readAll(t testing.TB, p *Partition, offset int64, maxBytes int) []byte {
	t.Helper()
	o, err := p.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for offset < o.HighWatermark {
		data, err := p.Read(offset, maxBytes, o.HighWatermark)
		if err != nil {
			t.Fatalf("Read(%d, %d): %v", offset, maxBytes, err)
		}
		ents := parseEntries(t, data)
		if len(ents) == 0 {
			break
		}
		all = append(all, data...)
		offset = ents[len(ents)-1].LastOffset + 1
	}
	return all
}

func concat(ref []refEntry) []byte {
	var out []byte
	for _, e := range ref {
		out = append(out, e.raw...)
	}
	return out
}

// refRecord is one record with the entry holding it.
type refRecord struct {
	offset, ts int64
	entry      int
}

func records(t testing.TB, ref []refEntry) []refRecord {
	t.Helper()
	var out []refRecord
	for i, e := range ref {
		recs, err := batch.Records(e.raw, codec.Kafka)
		if err != nil {
			t.Fatalf("records of entry %d: %v", i, err)
		}
		for _, r := range recs {
			out = append(out, refRecord{offset: r.Offset, ts: r.Timestamp, entry: i})
		}
	}
	return out
}

// firstEntryFrom is the index of the first reference entry whose last
// offset is >= offset, or len(ref).
func firstEntryFrom(ref []refEntry, offset int64) int {
	return sort.Search(len(ref), func(i int) bool { return ref[i].b.LastOffset >= offset })
}

func mustOpen(t testing.TB, dir string, opts Options) *Partition {
	t.Helper()
	p, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func assertCorruptIn(t testing.TB, err error, file string) {
	t.Helper()
	var ce *kafkalog.CorruptionError
	if !errors.Is(err, kafkalog.ErrCorrupt) || !errors.As(err, &ce) || ce.File != file {
		t.Fatalf("want a corruption error naming %s, got %v", file, err)
	}
}

func equalBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes, want %d (differ)", what, len(got), len(want))
	}
}
