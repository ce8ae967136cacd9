package seglog

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// fakeClock is an injectable clock for WithClock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// compactConfig is the reference compacted topic: segment.ms=3600000,
// min.cleanable.dirty.ratio=0.01, delete.retention.ms=100,
// min.compaction.lag.ms=0, max.compaction.lag.ms=8000, with the smallest
// segment.bytes.
func compactConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1048576
	cfg.SegmentMs = 3600000
	cfg.CleanupPolicy = "compact"
	cfg.MinCleanableDirtyRatio = 0.01
	cfg.DeleteRetentionMs = 100
	cfg.MinCompactionLagMs = 0
	cfg.MaxCompactionLagMs = 8000
	return cfg
}

// partitionDir returns "<tmp>/logs/<name>", a partition directory inside
// a log dir.
func partitionDir(t *testing.T, name string) string {
	return filepath.Join(t.TempDir(), "logs", name)
}

// readRecords reads the whole log through Read, as a consumer from the
// start does, and returns its data records (control batches skipped) in
// offset order. It fails on an offset that does not ascend.
func readRecords(t testing.TB, l *Log) []Record {
	t.Helper()
	recs, err := scanRecords(l)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// scanRecords is readRecords returning its error, for goroutines.
func scanRecords(l *Log) ([]Record, error) {
	var out []Record
	prev := int64(-1)
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		data, err := l.Read(off, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("read %d: %w", off, err)
		}
		if len(data) == 0 {
			return nil, fmt.Errorf("read %d: nothing below the high watermark %d", off, l.HighWatermark())
		}
		for p := 0; p < len(data); {
			b, err := batch.ParseHeader(data[p:], int64(p))
			if err != nil {
				return nil, err
			}
			raw := data[p : p+int(b.Size)]
			if !batch.CheckCRC(raw) {
				return nil, fmt.Errorf("batch at offset %d: bad CRC", b.BaseOffset)
			}
			recs, err := batch.Records(raw, codec.Kafka)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				if r.Offset <= prev {
					return nil, fmt.Errorf("offset %d read after %d", r.Offset, prev)
				}
				prev = r.Offset
				if !b.Control && r.Offset >= off {
					out = append(out, r)
				}
			}
			off = b.LastOffset + 1
			p += int(b.Size)
		}
	}
	return out, nil
}

// latestByKey is the reference scan consumer: key -> latest value (nil for
// a tombstone), and how many records each key has.
func latestByKey(recs []Record) (map[string][]byte, map[string]int) {
	latest, count := map[string][]byte{}, map[string]int{}
	for _, r := range recs {
		latest[string(r.Key)] = r.Value
		count[string(r.Key)]++
	}
	return latest, count
}

func parseHeaderAt(data []byte, p int) (batch.Batch, error) {
	return batch.ParseHeader(data[p:], int64(p))
}
