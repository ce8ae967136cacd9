package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/kafkalog/compact"
)

// paddedValue is the reference run's value: a label padded to 5000 bytes.
func paddedValue(label string) []byte {
	v := bytes.Repeat([]byte{'.'}, 5000)
	copy(v, label)
	return v
}

func appendKV(t *testing.T, l *Log, key string, value []byte) int64 {
	t.Helper()
	off, err := l.Append(Record{Key: []byte(key), Value: value})
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// TestReferenceCompactionRun reproduces the reference compaction run with exact
// counts: 8 keys x 4 updates + 2 tombstones read back as 34 records while
// the segment is active; 250 fillers roll it and the first pass leaves 258
// records with the tombstones still at offsets 32 and 33; 250 more fillers
// and a pass after delete.retention.ms leave 506 = 500 + 6 live keys, each
// once with its last value, the tombstoned keys gone.
func TestReferenceCompactionRun(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t, "reference-0")
	l := mustOpen(t, dir, compactConfig(), WithClock(clock.Now))
	defer l.Close()
	want := map[string][]byte{}
	for u := 1; u <= 4; u++ {
		for k := 1; k <= 8; k++ {
			key := fmt.Sprintf("key-%d", k)
			want[key] = paddedValue(fmt.Sprintf("%s-update-%d", key, u))
			appendKV(t, l, key, want[key])
		}
	}
	for _, key := range []string{"key-7", "key-8"} {
		appendKV(t, l, key, nil)
		delete(want, key)
	}
	if n := len(readRecords(t, l)); n != 34 {
		t.Fatalf("active segment: %d records, want 34", n)
	}
	if st, err := l.Clean(); err != nil || st.Cleaned {
		t.Fatalf("clean with only an active segment: %+v %v", st, err)
	}
	filler := func(from, to int) {
		for i := from; i < to; i++ {
			appendKV(t, l, fmt.Sprintf("filler-%d", i), paddedValue(fmt.Sprintf("filler-%d", i)))
		}
	}
	filler(0, 250)
	if len(l.Segments()) < 2 {
		t.Fatal("250 fillers did not roll the segment")
	}
	st, err := l.Clean()
	if err != nil || !st.Cleaned || st.FirstDirtyOffset != 0 {
		t.Fatalf("first pass: %+v %v", st, err)
	}
	recs := readRecords(t, l)
	if len(recs) != 258 {
		t.Fatalf("after the first pass: %d records, want 258", len(recs))
	}
	tombs := map[int64]string{}
	for _, r := range recs {
		if r.Value == nil {
			tombs[r.Offset] = string(r.Key)
		}
	}
	if len(tombs) != 2 || tombs[32] != "key-7" || tombs[33] != "key-8" {
		t.Fatalf("tombstones after the first pass: %v, want key-7 at 32 and key-8 at 33", tombs)
	}
	// Their batches carry the delete horizon: now + delete.retention.ms.
	for _, off := range []int64{32, 33} {
		data, err := l.Read(off, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := parseHeaderAt(data, 0)
		if h, ok := compact.DeleteHorizon(b); !ok || h != clock.Now().UnixMilli()+100 || b.BaseOffset != off {
			t.Fatalf("tombstone batch at %d: horizon %d %v, want %d", off, h, ok, clock.Now().UnixMilli()+100)
		}
	}
	if cp, ok, err := l.CleanerCheckpoint(); err != nil || !ok || cp != st.FirstUncleanableOffset || cp != l.Segments()[1].BaseOffset {
		t.Fatalf("checkpoint %d %v %v, want %d (the active segment's base)", cp, ok, err, st.FirstUncleanableOffset)
	}
	checkIndexes(t, dir)

	filler(250, 500)
	clock.Advance(100 * time.Millisecond) // delete.retention.ms
	if st, err = l.Clean(); err != nil || !st.Cleaned {
		t.Fatalf("second pass: %+v %v", st, err)
	}
	recs = readRecords(t, l)
	if len(recs) != 506 {
		t.Fatalf("after the second pass: %d records, want 506", len(recs))
	}
	latest, count := latestByKey(recs)
	for key, v := range want {
		if count[key] != 1 || !bytes.Equal(latest[key], v) {
			t.Errorf("%s: %d records, last value %.20q; want 1 with %.20q", key, count[key], latest[key], v)
		}
	}
	for _, key := range []string{"key-7", "key-8"} {
		if count[key] != 0 {
			t.Errorf("tombstoned %s still has %d records", key, count[key])
		}
	}
	for i := 0; i < 500; i++ {
		if count[fmt.Sprintf("filler-%d", i)] != 1 {
			t.Fatalf("filler-%d: %d records", i, count[fmt.Sprintf("filler-%d", i)])
		}
	}
	checkIndexes(t, dir)
	// The same map after a reopen: the cleaned segments are ordinary ones.
	l.Close()
	l = mustOpen(t, dir, compactConfig(), WithClock(clock.Now))
	if n := len(readRecords(t, l)); n != 506 {
		t.Fatalf("after reopen: %d records, want 506", n)
	}
}

func TestCleanPolicyAndRatio(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	cfg.CleanupPolicy = "delete"
	dir := partitionDir(t, "p-0")
	l := mustOpen(t, dir, cfg, WithClock(clock.Now))
	for i := 0; i < 300; i++ {
		appendKV(t, l, "same", paddedValue(fmt.Sprint(i)))
	}
	if st, err := l.Clean(); err != nil || st.Cleaned {
		t.Fatalf("delete policy cleaned: %+v %v", st, err)
	}
	l.Close()
	// min.cleanable.dirty.ratio=1 never passes; max.compaction.lag.ms
	// forces the cleaning once the first dirty batch is old enough.
	cfg.CleanupPolicy, cfg.MinCleanableDirtyRatio, cfg.MaxCompactionLagMs = "compact,delete", 1, 60000
	l = mustOpen(t, dir, cfg, WithClock(clock.Now))
	defer l.Close()
	if st, err := l.Clean(); err != nil || st.Cleaned || !strings.Contains(st.Reason, "ratio") {
		t.Fatalf("ratio 1 cleaned: %+v %v", st, err)
	}
	clock.Advance(61 * time.Second)
	st, err := l.Clean()
	if err != nil || !st.Cleaned || st.Reason != "max.compaction.lag.ms" {
		t.Fatalf("max lag: %+v %v", st, err)
	}
	if n := len(readRecords(t, l)); n != 1+300-int(st.FirstUncleanableOffset) {
		t.Fatalf("%d records after cleaning, want the latest rolled one plus the active segment's", n)
	}
}

func TestMinCompactionLagHoldsRecentSegments(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	cfg.MinCompactionLagMs, cfg.MaxCompactionLagMs = 10000, math.MaxInt64
	l := mustOpen(t, partitionDir(t, "lag-0"), cfg, WithClock(clock.Now))
	defer l.Close()
	for i := 0; i < 300; i++ {
		appendKV(t, l, "same", paddedValue(fmt.Sprint(i)))
	}
	if st, err := l.Clean(); err != nil || st.Cleaned {
		t.Fatalf("cleaned within min.compaction.lag.ms: %+v %v", st, err)
	}
	clock.Advance(10001 * time.Millisecond)
	if st, err := l.Clean(); err != nil || !st.Cleaned {
		t.Fatalf("not cleaned after min.compaction.lag.ms: %+v %v", st, err)
	}
}

func TestCleanOpenTransactionBoundsTheRange(t *testing.T) {
	clock := newFakeClock()
	l := mustOpen(t, partitionDir(t, "txn-0"), compactConfig(), WithClock(clock.Now))
	defer l.Close()
	appendKV(t, l, "a", paddedValue("a0"))
	if _, err := l.AppendTransactional(5, 0, Record{Key: []byte("a"), Value: paddedValue("open")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		appendKV(t, l, "b", paddedValue(fmt.Sprint(i)))
	}
	// The open transaction starts in the first segment: nothing is
	// cleanable.
	if st, err := l.Clean(); err != nil || st.Cleaned || st.FirstUncleanableOffset != 0 {
		t.Fatalf("cleaned past the last stable offset: %+v %v", st, err)
	}
}

func TestCleanTransactions(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t, "txns-0")
	cfg := compactConfig()
	l := mustOpen(t, dir, cfg, WithClock(clock.Now))
	if _, err := l.AppendTransactional(1, 0, Record{Key: []byte("a"), Value: []byte("aborted")}, Record{Key: []byte("z"), Value: []byte("aborted")}); err != nil {
		t.Fatal(err)
	}
	abortAt, err := l.EndTransaction(1, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendTransactional(2, 0, Record{Key: []byte("b"), Value: []byte("committed")}); err != nil {
		t.Fatal(err)
	}
	commitAt, err := l.EndTransaction(2, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, "a", []byte("plain"))
	// Reopen so that the producers are no longer active (seglog keeps
	// producer state in memory only): nothing keeps their batches empty.
	l.Close()
	l = mustOpen(t, dir, cfg, WithClock(clock.Now))
	defer l.Close()
	fillerN := 0
	pass := func() {
		t.Helper()
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		appendKV(t, l, fmt.Sprintf("filler-%d", fillerN), []byte("x"))
		fillerN++
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		if st, err := l.Clean(); err != nil || !st.Cleaned {
			t.Fatalf("pass: %+v %v", st, err)
		}
	}
	markers := func() map[int64]bool {
		m := map[int64]bool{}
		for _, s := range l.Segments() {
			data, err := l.Read(s.BaseOffset, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			for p := 0; p < len(data); {
				b, err := parseHeaderAt(data, p)
				if err != nil {
					t.Fatal(err)
				}
				if b.Control {
					m[b.BaseOffset] = true
				}
				p += int(b.Size)
			}
		}
		return m
	}
	pass()
	latest, count := latestByKey(readRecords(t, l))
	if count["z"] != 0 || string(latest["a"]) != "plain" || count["a"] != 1 || string(latest["b"]) != "committed" {
		t.Fatalf("after pass 1: %q %v", latest, count)
	}
	// Markers stay while their transactions' batches were read in the pass
	// (the aborted batch went in this very pass).
	if m := markers(); !m[abortAt] || !m[commitAt] {
		t.Fatalf("markers after pass 1: %v", m)
	}
	// The committed batch still holds the latest "b", so its marker stays
	// for good; the abort marker gets a delete horizon, then goes.
	pass()
	clock.Advance(100 * time.Millisecond)
	pass()
	if m := markers(); m[abortAt] || !m[commitAt] {
		t.Fatalf("markers after the horizon: %v (abort %d, commit %d)", m, abortAt, commitAt)
	}
	if latest, _ := latestByKey(readRecords(t, l)); string(latest["b"]) != "committed" || string(latest["a"]) != "plain" {
		t.Fatalf("values lost: %q", latest)
	}
	// The cleaned segments keep no .txnindex entry once the aborted batch
	// is gone.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), kafkalog.TxnIndexSuffix) {
			if data, _ := os.ReadFile(filepath.Join(dir, e.Name())); len(data) > 0 {
				t.Errorf("%s still holds %d bytes", e.Name(), len(data))
			}
		}
	}
}

func TestCleanCheckpointKeepsOtherPartitions(t *testing.T) {
	dir := partitionDir(t, "cp-3")
	other := kafkalog.TopicPartition{Topic: "other", Partition: 1}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Update(filepath.Join(filepath.Dir(dir), checkpoint.CleanerOffsetFile), other, 77); err != nil {
		t.Fatal(err)
	}
	l := mustOpen(t, dir, compactConfig(), WithClock(newFakeClock().Now))
	defer l.Close()
	for i := 0; i < 300; i++ {
		appendKV(t, l, fmt.Sprint(i%5), paddedValue(fmt.Sprint(i)))
	}
	st, err := l.Clean()
	if err != nil || !st.Cleaned {
		t.Fatal(st, err)
	}
	m, err := checkpoint.ReadFile(l.CheckpointPath())
	if err != nil || m[other] != 77 || m[kafkalog.TopicPartition{Topic: "cp", Partition: 3}] != st.FirstUncleanableOffset {
		t.Fatalf("checkpoint %v %v", m, err)
	}
}

func TestCleanNeedsPartitionDirName(t *testing.T) {
	l := mustOpen(t, filepath.Join(t.TempDir(), "notapartition"), compactConfig())
	defer l.Close()
	if _, err := l.Clean(); !errors.Is(err, ErrNotPartitionDir) {
		t.Fatalf("Clean = %v", err)
	}
}

func TestCleanerConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.CleanupPolicy != "delete" || cfg.MinCleanableDirtyRatio != 0.5 || cfg.MinCompactionLagMs != 0 ||
		cfg.MaxCompactionLagMs != math.MaxInt64 || cfg.DeleteRetentionMs != 86400000 || cfg.Compact() {
		t.Fatalf("defaults %+v", cfg)
	}
	for _, p := range []string{"compact", "compact,delete", "delete,compact", "delete"} {
		cfg.CleanupPolicy = p
		if err := cfg.Validate(); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	cfg.CleanupPolicy, cfg.MinCleanableDirtyRatio, cfg.MinCompactionLagMs, cfg.MaxCompactionLagMs, cfg.DeleteRetentionMs = "compact,compact", 1.5, 10, 5, -1
	err := cfg.Validate()
	for _, want := range []string{"cleanup.policy", "min.cleanable.dirty.ratio", "must not be above max.compaction.lag.ms", "delete.retention.ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to name %s", err, want)
		}
	}
}

func TestCleanKeepsCodecAndProducerFields(t *testing.T) {
	l := mustOpen(t, partitionDir(t, "codec-0"), compactConfig(), WithClock(newFakeClock().Now))
	defer l.Close()
	for _, c := range []batch.Codec{batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		if _, err := l.AppendBatch(c, Record{Key: []byte("a"), Value: []byte("old-" + c.String())},
			Record{Key: []byte(c.String()), Value: paddedValue(c.String())}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 250; i++ {
		appendKV(t, l, fmt.Sprint(i), paddedValue("x"))
	}
	if st, err := l.Clean(); err != nil || !st.Cleaned {
		t.Fatal(st, err)
	}
	for off, c := range []batch.Codec{batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		data, err := l.Read(int64(2*off), 1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := parseHeaderAt(data, 0)
		recs, err := batch.Records(data[:b.Size], codec.Kafka)
		if err != nil {
			t.Fatal(err)
		}
		want := 1 // the zstd batch also holds the latest "a"
		if c == batch.CodecZstd {
			want = 2
		}
		if b.Codec != c || b.BaseOffset != int64(2*off) || b.LastOffset != int64(2*off+1) || len(recs) != want || string(recs[len(recs)-1].Key) != c.String() {
			t.Fatalf("batch %d after cleaning: %+v, %d records", 2*off, b, len(recs))
		}
	}
}
