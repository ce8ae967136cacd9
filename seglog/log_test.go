package seglog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1048575
	cfg.SegmentMs = 0
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "must be at least 1048576") || !strings.Contains(err.Error(), "segment.ms") {
		t.Fatalf("Validate = %v, want both problems", err)
	}
	if _, err := Open(t.TempDir(), cfg); err == nil {
		t.Fatal("Open accepted an invalid config")
	}
}

// TestIndexesAndRebuild: the indexes written while appending are the ones a
// rebuild from the log produces, byte for byte, and they are trimmed on roll.
func TestIndexesAndRebuild(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := mustOpen(t, dir, smallConfig())
	fill(t, l, 700, 3000)
	if len(l.Segments()) < 3 {
		t.Fatalf("only %d segments", len(l.Segments()))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, dir)
	matches, _ := filepath.Glob(filepath.Join(dir, "*index"))
	before := map[string][]byte{}
	for _, m := range matches {
		before[m], _ = os.ReadFile(m)
		if err := os.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
	l = mustOpen(t, dir, smallConfig())
	readAll(t, l, 3000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for m, want := range before {
		got, err := os.ReadFile(m)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: rebuilt index differs (%d vs %d bytes, %v)", filepath.Base(m), len(got), len(want), err)
		}
	}
}

func TestSegmentMsRoll(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	cfg := smallConfig()
	cfg.SegmentMs = 60_000
	l := mustOpen(t, t.TempDir(), cfg, WithClock(func() time.Time { return now }))
	defer l.Close()
	ts := now.UnixMilli()
	for _, step := range []struct {
		ts       int64
		segments int
	}{
		{ts, 1},          // first batch: an empty segment never rolls
		{ts + 60_000, 1}, // exactly segment.ms later: not yet
		{ts + 60_001, 2}, // past segment.ms measured from the first batch
		{ts + 60_002, 2},
		{ts + 200_000, 3},
	} {
		if _, err := l.Append(Record{Value: []byte("v"), Timestamp: step.ts}); err != nil {
			t.Fatal(err)
		}
		if got := len(l.Segments()); got != step.segments {
			t.Fatalf("after ts %d: %d segments, want %d", step.ts, got, step.segments)
		}
	}
	// Without timestamps the segment's age is measured from its creation.
	l2 := mustOpen(t, t.TempDir(), cfg, WithClock(func() time.Time { return now }))
	defer l2.Close()
	if _, err := l2.Append(Record{Value: []byte("v"), Timestamp: -1}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(61 * time.Second)
	if _, err := l2.Append(Record{Value: []byte("v"), Timestamp: -1}); err != nil {
		t.Fatal(err)
	}
	if got := len(l2.Segments()); got != 2 {
		t.Fatalf("%d segments, want a roll by creation time", got)
	}
}

func TestReadSemantics(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	recs := make([]Record, 10)
	for i := range recs {
		recs[i] = Record{Value: []byte{byte(i)}, Timestamp: 1000 + int64(i)}
	}
	if _, err := l.Append(Record{Value: []byte("single"), Timestamp: 999}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecZstd} {
		base, err := l.AppendBatch(c, recs...)
		if err != nil {
			t.Fatal(err)
		}
		// An offset inside a batch returns the whole batch.
		data, err := l.Read(base+5, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := batch.ParseHeader(data, 0)
		if err != nil || b.BaseOffset != base || b.LastOffset != base+9 || int(b.Size) != len(data) || b.Codec != c {
			t.Fatalf("%s: read %+v (%d bytes), %v", c, b, len(data), err)
		}
		got, err := batch.Records(data, codec.Kafka)
		if err != nil || len(got) != 10 || got[5].Offset != base+5 {
			t.Fatalf("%s: records %v %v", c, len(got), err)
		}
	}
	// maxBytes: at least one batch, then whole batches within the limit.
	all, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := l.Read(0, 0)
	first, _ := batch.ParseHeader(all, 0)
	if len(one) != int(first.Size) {
		t.Errorf("maxBytes 0 read %d bytes, want one batch of %d", len(one), first.Size)
	}
	two, _ := l.Read(0, int(first.Size)+1)
	if len(two) != int(first.Size) {
		t.Errorf("a second batch that does not fit was returned")
	}
	if end := l.HighWatermark(); end != 31 {
		t.Fatalf("high watermark %d", end)
	}
	if data, err := l.Read(31, 100); err != nil || len(data) != 0 {
		t.Errorf("read at high watermark: %d bytes, %v", len(data), err)
	}
	var oor *OffsetOutOfRangeError
	if _, err := l.Read(32, 100); !errors.As(err, &oor) || oor.Start != 0 || oor.End != 31 {
		t.Errorf("read past high watermark: %v", err)
	}
	if _, err := l.Read(-1, 100); !errors.As(err, &oor) {
		t.Errorf("negative offset: %v", err)
	}
}

// TestCompactedGaps: a segment's base offset is not its first offset and
// offsets have gaps; reads in a gap return the next batch, in the next
// segment when needed.
func TestCompactedGaps(t *testing.T) {
	dir := t.TempDir()
	write := func(base int64, offsets ...int64) {
		var data []byte
		for _, o := range offsets {
			var err error
			data, err = batch.AppendBatch(data, batch.NewParams(o, 0), []Record{{Timestamp: 10 * o, Value: []byte{byte(o)}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.LogSuffix)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 3, 50, 97)
	write(100, 100, 101)
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	for _, tc := range []struct{ read, want int64 }{{0, 3}, {3, 3}, {10, 50}, {50, 50}, {51, 97}, {98, 100}, {99, 100}, {101, 101}} {
		data, err := l.Read(tc.read, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := batch.ParseHeader(data, 0)
		if err != nil || b.BaseOffset != tc.want {
			t.Errorf("Read(%d) starts at %d (%v), want %d", tc.read, b.BaseOffset, err, tc.want)
		}
	}
	if l.HighWatermark() != 102 || l.LogStartOffset() != 0 {
		t.Errorf("range [%d, %d)", l.LogStartOffset(), l.HighWatermark())
	}
	off, ts, err := l.OffsetForTimestamp(400)
	if err != nil || off != 50 || ts != 500 {
		t.Errorf("OffsetForTimestamp(400) = %d, %d, %v", off, ts, err)
	}
	off, _, err = l.OffsetForTimestamp(975)
	if err != nil || off != 100 {
		t.Errorf("OffsetForTimestamp(975) = %d, %v", off, err)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	// Timestamps 1000, 1010, ... with two out-of-order records: an old one
	// at 300 and a far-future one at 599.
	for i := 0; i < 600; i++ {
		ts := 1000 + int64(i)*10
		switch i {
		case 300:
			ts = 500
		case 599:
			ts = 9_000_000
		}
		if _, err := l.Append(Record{Value: make([]byte, 5000), Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.Segments()) < 3 {
		t.Fatal("want several segments")
	}
	for _, tc := range []struct{ ts, off int64 }{
		{0, 0}, {500, 0}, {1000, 0}, {1001, 1}, {1010, 1}, {3055, 206}, {3060, 206}, {3061, 207},
		{3990, 299}, {3991, 301}, // offset 300 carries an old timestamp
		{6000, 500}, {6980, 598}, {6981, 599}, {9_000_000, 599},
	} {
		off, _, err := l.OffsetForTimestamp(tc.ts)
		if err != nil || off != tc.off {
			t.Errorf("OffsetForTimestamp(%d) = %d, %v; want %d", tc.ts, off, err, tc.off)
		}
	}
	if _, _, err := l.OffsetForTimestamp(9_000_001); !errors.Is(err, ErrNoTimestampFound) {
		t.Errorf("past every timestamp: %v", err)
	}
}

func TestLeaderEpochCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	fill(t, l, 5, 10)
	l.Close()
	cfg := smallConfig()
	cfg.LeaderEpoch = 3
	l = mustOpen(t, dir, cfg)
	fill(t, l, 2, 10)
	l.Close()
	raw, _ := os.ReadFile(filepath.Join(dir, kafkalog.LeaderEpochCheckpointFile))
	if string(raw) != "0\n2\n0 0\n3 5\n" {
		t.Errorf("checkpoint %q", raw)
	}
}

func TestAppendErrors(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxMessageBytes = 1000
	l := mustOpen(t, t.TempDir(), cfg)
	if _, err := l.Append(); !errors.Is(err, ErrNoRecords) {
		t.Errorf("no records: %v", err)
	}
	if _, err := l.Append(Record{Value: make([]byte, 2000)}); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("too large: %v", err)
	}
	if l.HighWatermark() != 0 {
		t.Errorf("a failed append moved the high watermark to %d", l.HighWatermark())
	}
	l.Close()
	if _, err := l.Append(Record{Value: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Errorf("append after close: %v", err)
	}
	if _, err := l.Read(0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
}
