package seglog

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = MinSegmentBytes
	return cfg
}

func mustOpen(t *testing.T, dir string, cfg Config, opts ...Option) *Log {
	t.Helper()
	l, err := Open(dir, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// valueFor returns the deterministic value of the record at offset.
func valueFor(offset int64, size int) []byte {
	v := bytes.Repeat([]byte{byte(offset)}, size)
	copy(v, fmt.Sprintf("offset-%d-", offset))
	return v
}

// fill appends n single-record batches with values of size bytes.
func fill(t *testing.T, l *Log, n int, size int) {
	t.Helper()
	for i := 0; i < n; i++ {
		off := l.HighWatermark()
		got, err := l.Append(Record{Value: valueFor(off, size), Timestamp: 1_600_000_000_000 + off})
		if err != nil {
			t.Fatal(err)
		}
		if got != off {
			t.Fatalf("append returned %d, want %d", got, off)
		}
	}
}

// readAll reads every offset from the log start to the high watermark and
// checks that each record has the value fill gave it.
func readAll(t *testing.T, l *Log, size int) {
	t.Helper()
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		data, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		if len(data) == 0 {
			t.Fatalf("read %d: no data below high watermark %d", off, l.HighWatermark())
		}
		for p := 0; p < len(data); {
			b, err := batch.ParseHeader(data[p:], int64(p))
			if err != nil {
				t.Fatal(err)
			}
			recs, err := batch.Records(data[p:p+int(b.Size)], codec.Kafka)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Offset >= off && !bytes.Equal(r.Value, valueFor(r.Offset, size)) {
					t.Fatalf("offset %d: wrong value", r.Offset)
				}
			}
			off = b.LastOffset + 1
			p += int(b.Size)
		}
	}
}

// checkIndexes verifies every segment's index files on disk: entries land
// on batch starts, each offset entry names its batch's last offset, and
// each time entry a batch holding that max timestamp. Rolled segments must
// be trimmed.
func checkIndexes(t *testing.T, dir string) {
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
	for i, base := range bases {
		logData, err := os.ReadFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.LogSuffix)))
		if err != nil {
			t.Fatal(err)
		}
		byPos, byLast := map[int64]batch.Batch{}, map[int64]batch.Batch{}
		s := batch.NewScanner(bytes.NewReader(logData), int64(len(logData)), batch.ScanOptions{})
		for s.Next() {
			b := s.Batch()
			byPos[b.Position], byLast[b.LastOffset] = b, b
		}
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
		offRaw, err := os.ReadFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.IndexSuffix)))
		if err != nil {
			t.Fatal(err)
		}
		offs, err := index.ParseOffsetIndex(offRaw, base)
		if err != nil {
			t.Fatal(err)
		}
		timeRaw, err := os.ReadFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.TimeIndexSuffix)))
		if err != nil {
			t.Fatal(err)
		}
		times, err := index.ParseTimeIndex(timeRaw, base)
		if err != nil {
			t.Fatal(err)
		}
		rolled := i < len(bases)-1
		if rolled && (len(offRaw) != len(offs)*8 || len(timeRaw) != len(times)*12) {
			t.Errorf("segment %d: index not trimmed (%d bytes for %d entries)", base, len(offRaw), len(offs))
		}
		for _, e := range offs {
			if b, ok := byPos[int64(e.Position)]; !ok || b.LastOffset != e.Offset {
				t.Errorf("segment %d: offset entry %+v not on a batch ending there", base, e)
			}
		}
		for _, e := range times {
			if b, ok := byLast[e.Offset]; !ok || b.MaxTimestamp != e.Timestamp {
				t.Errorf("segment %d: time entry %+v not on a batch with that max timestamp", base, e)
			}
		}
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}
