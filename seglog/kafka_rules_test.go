package seglog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
)

// A rolled segment whose time index is rebuilt keeps its max timestamp
// across reopens, so OffsetForTimestamp still finds it.
func TestRebuiltTimeIndexKeepsMax(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	for i := int64(0); i < 10; i++ {
		l.Append(Record{Value: []byte("v"), Timestamp: 1000 + i})
	}
	l.Roll()
	l.Append(Record{Value: []byte("v"), Timestamp: 5000})
	l.Close()
	os.Remove(filepath.Join(dir, kafkalog.FileName(0, kafkalog.TimeIndexSuffix)))
	mustOpen(t, dir, smallConfig()).Close()
	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	if off, ts, err := l.OffsetForTimestamp(1009); err != nil || off != 9 || ts != 1009 {
		t.Fatalf("OffsetForTimestamp(1009) = %d, %d, %v", off, ts, err)
	}
	if got := l.Segments()[0].MaxTimestamp; got != 1009 {
		t.Fatalf("max timestamp %d", got)
	}
}

// Recovery that cuts the log also cuts the leader epoch checkpoint.
func TestEpochsTruncatedWithLog(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	fill(t, l, 10, 10)
	l.Close()
	cfg := smallConfig()
	cfg.LeaderEpoch = 1
	l = mustOpen(t, dir, cfg)
	fill(t, l, 10, 10)
	l.Close()
	// Lose the last 15 batches: only offsets 0-4 survive.
	p := filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix))
	st, _ := os.Stat(p)
	os.Truncate(p, st.Size()/20*5)
	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	if l.HighWatermark() != 5 {
		t.Fatalf("high watermark %d", l.HighWatermark())
	}
	if got := l.LeaderEpochs(); len(got) != 1 || got[0] != (EpochEntry{Epoch: 0, StartOffset: 0}) {
		t.Fatalf("epochs %v", got)
	}
}

// A log whose checkpoint has a later epoch continues in it.
func TestAdoptsLatestEpoch(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.LeaderEpoch = 4
	l := mustOpen(t, dir, cfg)
	fill(t, l, 2, 10)
	l.Close()
	l = mustOpen(t, dir, smallConfig()) // LeaderEpoch 0
	defer l.Close()
	fill(t, l, 1, 10)
	data, _ := l.Read(2, 0)
	if epoch := int32(data[12])<<24 | int32(data[13])<<16 | int32(data[14])<<8 | int32(data[15]); epoch != 4 {
		t.Fatalf("batch written in epoch %d after epoch 4", epoch)
	}
}

// segment.ms counts from the first batch's timestamp, also after a reopen.
func TestSegmentMsAfterReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentMs = 1000
	clock := func() time.Time { return time.UnixMilli(5_000_000) }
	l := mustOpen(t, dir, cfg, WithClock(clock))
	l.Append(Record{Value: []byte("a"), Timestamp: 1000})
	l.Close()
	l = mustOpen(t, dir, cfg, WithClock(clock))
	defer l.Close()
	l.Append(Record{Value: []byte("b"), Timestamp: 10000})
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("%d segments, want a roll by segment.ms", n)
	}
}

// Kafka's limits: segment.bytes fits an int; a batch larger than
// segment.bytes is refused; the time index keeps a slot for the roll.
func TestKafkaLimits(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 3 << 30
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "at most 2147483647") {
		t.Fatalf("Validate = %v", err)
	}
	cfg = smallConfig()
	cfg.MaxMessageBytes = 2 << 20
	l := mustOpen(t, t.TempDir(), cfg)
	if _, err := l.Append(Record{Value: make([]byte, MinSegmentBytes)}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("batch over segment.bytes: %v", err)
	}
	l.Close()
	cfg = smallConfig()
	cfg.SegmentIndexBytes, cfg.IndexIntervalBytes = 36, 0
	l = mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	fill(t, l, 8, 10)
	if segs := l.Segments(); segs[1].BaseOffset != 3 {
		t.Fatalf("with room for 3 time entries the first segment holds %d batches, want 3", segs[1].BaseOffset)
	}
}

// A .swap log that cannot be read is refused, not silently skipped (an
// interrupted cleaning with a readable .swap is finished: clean_test.go).
func TestCorruptSwapFileRefused(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	fill(t, l, 3, 10)
	l.Close()
	os.WriteFile(filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix)+kafkalog.SwapSuffix), []byte("x"), 0o644)
	if _, err := Open(dir, smallConfig()); err == nil || !strings.Contains(err.Error(), "swap") {
		t.Fatalf("Open = %v", err)
	}
}
