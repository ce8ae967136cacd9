package seglog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// TestReferenceScenario checks the exact segment sizes a broker produces for
// 600 records of 5000-byte values, one per batch, segment.bytes=1048576.
func TestReferenceScenario(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ref-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1048576
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte{'x'}, 5000)
	for i := 0; i < 600; i++ {
		off, err := l.Append(Record{Value: value, Timestamp: 1_700_000_000_000 + int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		if off != int64(i) {
			t.Fatalf("append %d got offset %d", i, off)
		}
	}
	// Three segments rolled by size; the scenario then rolls the last one
	// (as segment.ms would) so that three segments are rolled for tiering.
	if segs := l.Segments(); len(segs) != 3 || segs[2].BaseOffset != 412 || !segs[2].Active {
		t.Fatalf("before the final roll: %+v", segs)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name       string
		size       int64
		first, end int64
	}{
		{"00000000000000000000.log", 1044420, 0, 206},
		{"00000000000000000206.log", 1044420, 206, 412},
		{"00000000000000000412.log", 953160, 412, 600},
		{"00000000000000000600.log", 0, 600, 600},
	}
	segs := l.Segments()
	if len(segs) != len(want) {
		t.Fatalf("got %d segments, want %d: %+v", len(segs), len(want), segs)
	}
	for i, w := range want {
		st, err := os.Stat(filepath.Join(dir, w.name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != w.size {
			t.Errorf("%s: %d bytes, want %d", w.name, st.Size(), w.size)
		}
		if segs[i].BaseOffset != w.first || segs[i].NextOffset != w.end {
			t.Errorf("segment %d covers [%d,%d), want [%d,%d)", i, segs[i].BaseOffset, segs[i].NextOffset, w.first, w.end)
		}
	}
	if got := l.HighWatermark(); got != 600 {
		t.Errorf("high watermark %d, want 600", got)
	}
	if got := l.LogStartOffset(); got != 0 {
		t.Errorf("log start offset %d, want 0", got)
	}
	// Every record reads back.
	for off := int64(0); off < 600; off++ {
		data, err := l.Read(off, 1)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Offset != off || !bytes.Equal(recs[0].Value, value) || recs[0].Key != nil {
			t.Fatalf("offset %d read back wrong: %+v", off, recs[0].Offset)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
