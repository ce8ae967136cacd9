package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/seglog"
)

// codecLog writes partition dir with the segment log under cfg: 60
// batches of 4 records (keys "key-N", about 1500 bytes of text each,
// create times from created on, 1 ms apart), the producer asking for
// snappy, rolled every 20 batches, so two segments are rolled and one is
// active. The Log's clock is now, one second later per batch. It returns
// the records as a consumer must see them: with the append time as
// timestamp under LogAppendTime.
func codecLog(t *testing.T, dir string, cfg seglog.Config, created int64, now time.Time) []batch.Record {
	t.Helper()
	l, err := seglog.Open(dir, cfg, seglog.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var want []batch.Record
	n := 0
	for b := 0; b < 60; b++ {
		recs := make([]seglog.Record, 4)
		for i := range recs {
			var v strings.Builder
			for j := 0; v.Len() < 1500; j++ {
				fmt.Fprintf(&v, "record %d, line %d: tiered storage keeps the log whole. ", n, j)
			}
			recs[i] = seglog.Record{Key: []byte(fmt.Sprintf("key-%d", n)), Value: []byte(v.String()),
				Headers: []seglog.RecordHeader{{Key: "n", Value: []byte(fmt.Sprint(n))}}, Timestamp: created + int64(n)}
			n++
		}
		off, err := l.AppendBatch(batch.CodecSnappy, recs...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			r.Offset = off + int64(i)
			if cfg.MessageTimestampType == seglog.TimestampLogAppendTime {
				r.Timestamp = now.UnixMilli()
			}
			want = append(want, r)
		}
		now = now.Add(time.Second)
		if b%20 == 19 && b < 59 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return want
}

// TestKafkaCodecsThroughListener: partitions written by the segment log
// with each compression.type (the producer asking for snappy every time)
// and one with message.timestamp.type=LogAppendTime, tiered up to their
// active segments, read back through the Kafka listener by franz-go and
// kcat (librdkafka, its own gzip, snappy, lz4 and zstd decoders): every
// record exactly as written, LogAppendTime records with their batch's
// append time.
func TestKafkaCodecsThroughListener(t *testing.T) {
	t.Parallel()
	w := newKWorld(t)
	created := time.Now().Add(-time.Hour).UnixMilli()
	now := time.Now().Add(-30 * time.Minute).Truncate(time.Millisecond)
	want := map[tpKey][]batch.Record{}
	for _, ct := range []string{seglog.CompressionUncompressed, seglog.CompressionGzip, seglog.CompressionSnappy,
		seglog.CompressionLZ4, seglog.CompressionZstd, seglog.CompressionProducer} {
		cfg := seglog.DefaultConfig()
		cfg.SegmentBytes, cfg.CompressionType = seglog.MinSegmentBytes, ct
		tp := tpKey{Topic: "codec-" + ct, Partition: 0}
		want[tp] = codecLog(t, filepath.Join(w.logDir, tp.Topic+"-0"), cfg, created, now)
	}
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes, cfg.CompressionType, cfg.MessageTimestampType = seglog.MinSegmentBytes, seglog.CompressionZstd, seglog.TimestampLogAppendTime
	lat := tpKey{Topic: "lat-zstd", Partition: 0}
	want[lat] = codecLog(t, filepath.Join(w.logDir, "lat-zstd-0"), cfg, created, now)

	w.tier(topics.Retention{LocalRetentionMs: ptr(0)})
	for tp := range want {
		if o := w.offsets(tp.Topic, tp.Partition); o.HighestTieredOffset != 159 || o.LocalLogStartOffset != 160 {
			t.Fatalf("%s: not tiered up to the active segment at 160: %+v", tp, o)
		}
	}
	last := map[tpKey]int64{}
	for tp, recs := range want {
		last[tp] = recs[len(recs)-1].Offset
	}
	got, err := kgoRead(w.addr, last)
	if err != nil {
		t.Fatal(err)
	}
	for tp, recs := range want {
		if err := sameRecords(got[tp], recs); err != nil {
			t.Errorf("franz-go, %s: %v", tp, err)
		}
	}
	kcat := needKcat(t)
	for tp, recs := range want {
		got, err := kcatAll(kcat, w.addr, tp)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRecords(got, recs); err != nil {
			t.Errorf("kcat, %s: %v", tp, err)
		}
	}
	if n := w.refused(); n != 0 {
		t.Fatalf("%v connections refused", n)
	}
}

// TestLogAppendTimeRetention: the same records, stamped by their
// producers 30 days ago, in a CreateTime partition and a LogAppendTime
// partition appended now; retention.ms of 7 days deletes the CreateTime
// partition's rolled segments (its log start offset moves to the active
// segment) and keeps every segment of the LogAppendTime partition, whose
// max timestamps (the copier's retention evidence) are the append times.
func TestLogAppendTimeRetention(t *testing.T) {
	t.Parallel()
	w := newKWorld(t)
	created := time.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	now := time.Now().Add(-time.Minute)
	ct, lat := tpKey{Topic: "createtime", Partition: 0}, tpKey{Topic: "logappendtime", Partition: 0}
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = seglog.MinSegmentBytes
	codecLog(t, filepath.Join(w.logDir, "createtime-0"), cfg, created, now)
	cfg.MessageTimestampType = seglog.TimestampLogAppendTime
	want := codecLog(t, filepath.Join(w.logDir, "logappendtime-0"), cfg, created, now)

	week := int64(7 * 24 * 3600 * 1000)
	w.tier(topics.Retention{RetentionMs: ptr(week), LocalRetentionMs: ptr(0)})
	if o := w.offsets(ct.Topic, 0); o.LogStartOffset != 160 {
		t.Fatalf("CreateTime partition: log start offset %d, want 160 (its 30-day-old segments deleted): %+v", o.LogStartOffset, o)
	}
	if bases := localLogs(t, filepath.Join(w.logDir, "createtime-0")); len(bases) != 1 || bases[0] != 160 {
		t.Fatalf("CreateTime partition: local segments %v, want the active one only", bases)
	}
	o := w.offsets(lat.Topic, 0)
	if o.LogStartOffset != 0 || o.HighestTieredOffset != 159 {
		t.Fatalf("LogAppendTime partition: %+v, want every segment kept, tiered up to 159", o)
	}
	rows, err := w.store.Segments(remotelog.TopicPartition{Topic: lat.Topic, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	finished := 0
	for _, r := range rows {
		if r.State == remotelog.CopySegmentFinished {
			finished++
			if r.MaxTimestampMs < now.UnixMilli() {
				t.Errorf("copy %d-%d: max timestamp %d is not an append time (>= %d)", r.StartOffset, r.EndOffset, r.MaxTimestampMs, now.UnixMilli())
			}
		}
	}
	if finished != 2 {
		t.Fatalf("LogAppendTime partition: %d finished copies, want 2", finished)
	}
	// Every record still reads, with its append time.
	got, err := kgoRead(w.addr, map[tpKey]int64{lat: want[len(want)-1].Offset})
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRecords(got[lat], want); err != nil {
		t.Fatal(err)
	}
}
