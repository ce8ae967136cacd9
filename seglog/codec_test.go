package seglog

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// codecRecords returns n records with keys "key-N", compressible text
// values of about size bytes and one header, stamped from ts on.
func codecRecords(n, size int, ts int64) []Record {
	recs := make([]Record, n)
	for i := range recs {
		var v strings.Builder
		for j := 0; v.Len() < size; j++ {
			fmt.Fprintf(&v, "record %d line %d: the quick brown fox jumps over the lazy dog. ", i, j)
		}
		recs[i] = Record{Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(v.String()[:size]),
			Headers: []RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}, Timestamp: ts + int64(i)}
	}
	return recs
}

// payloadMagic is how each codec's payload starts as Kafka writes it: a
// gzip member, the xerial snappy header, an LZ4 frame, a zstd frame.
var payloadMagic = map[batch.Codec][]byte{
	batch.CodecGzip:   {0x1f, 0x8b},
	batch.CodecSnappy: {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1},
	batch.CodecLZ4:    {0x04, 0x22, 0x4d, 0x18},
	batch.CodecZstd:   {0x28, 0xb5, 0x2f, 0xfd},
}

// entries returns every batch of the partition directory's .log files,
// scanned from disk with CRC checks.
func entries(t *testing.T, dir string) [][]byte {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*"+kafkalog.LogSuffix))
	var out [][]byte
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		sc := batch.NewScanner(f, st.Size(), batch.ScanOptions{})
		for sc.Next() {
			raw, err := sc.Raw()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, bytes.Clone(raw))
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f.Close()
	}
	return out
}

// TestCompressionType: each compression.type writes every data batch with
// its codec (producer: the caller's) in Kafka's framing, whatever codec the
// caller asked for; the records read back unchanged through the Log, after
// a reopen, and through franz-go's own decompressor.
func TestCompressionType(t *testing.T) {
	kgoDec := kgo.DefaultDecompressor()
	for _, tc := range []struct {
		topic string
		asked batch.Codec
		want  batch.Codec
	}{
		{CompressionProducer, batch.CodecNone, batch.CodecNone},
		{CompressionProducer, batch.CodecSnappy, batch.CodecSnappy},
		{CompressionUncompressed, batch.CodecZstd, batch.CodecNone},
		{CompressionGzip, batch.CodecNone, batch.CodecGzip},
		{CompressionSnappy, batch.CodecLZ4, batch.CodecSnappy},
		{CompressionLZ4, batch.CodecGzip, batch.CodecLZ4},
		{CompressionZstd, batch.CodecNone, batch.CodecZstd},
		{CompressionZstd, batch.CodecZstd, batch.CodecZstd},
	} {
		t.Run(fmt.Sprintf("%s/asked-%s", tc.topic, tc.asked), func(t *testing.T) {
			dir := t.TempDir()
			cfg := smallConfig()
			cfg.CompressionType = tc.topic
			l := mustOpen(t, dir, cfg)
			// 40 batches of 5 records of 2000 bytes (a 32 KiB xerial
			// block holds more than one record).
			var want []Record
			for b := 0; b < 40; b++ {
				recs := codecRecords(5, 2000, 1_700_000_000_000+int64(b)*10)
				off, err := l.AppendBatch(tc.asked, recs...)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range recs {
					r.Offset = off + int64(i)
					want = append(want, r)
				}
				if b == 19 {
					if err := l.Roll(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			var got []Record
			for _, raw := range entries(t, dir) {
				b, _ := batch.ParseHeader(raw, 0)
				if b.Codec != tc.want {
					t.Fatalf("batch at %d written with %s, want %s", b.BaseOffset, b.Codec, tc.want)
				}
				if m := payloadMagic[tc.want]; m != nil && !bytes.HasPrefix(raw[batch.HeaderSize:], m) {
					t.Fatalf("%s payload starts %x, want %x", tc.want, raw[batch.HeaderSize:batch.HeaderSize+16], m)
				}
				if tc.want != batch.CodecNone {
					// franz-go decodes the same payload to the same bytes.
					ours, err := codec.Kafka.Decompress(b.Codec, raw[batch.HeaderSize:], 1<<24)
					if err != nil {
						t.Fatal(err)
					}
					theirs, err := kgoDec.Decompress(raw[batch.HeaderSize:], kgo.CompressionCodecType(b.Codec))
					if err != nil || !bytes.Equal(ours, theirs) {
						t.Fatalf("franz-go decompresses the %s payload differently: %v", b.Codec, err)
					}
				}
				recs, err := batch.Records(raw, codec.Kafka)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, recs...)
			}
			sameRecords(t, got, want)
			// And through a reopened Log's Read.
			l = mustOpen(t, dir, cfg)
			defer l.Close()
			got = got[:0]
			for off := int64(0); off < l.HighWatermark(); {
				data, err := l.Read(off, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				for p := 0; p < len(data); {
					b, _ := batch.ParseHeader(data[p:], 0)
					recs, err := batch.Records(data[p:p+int(b.Size)], codec.Kafka)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, recs...)
					p += int(b.Size)
					off = b.LastOffset + 1
				}
			}
			sameRecords(t, got, want)
		})
	}
}

func sameRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Offset != w.Offset || g.Timestamp != w.Timestamp || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) ||
			len(g.Headers) != 1 || g.Headers[0].Key != w.Headers[0].Key || !bytes.Equal(g.Headers[0].Value, w.Headers[0].Value) {
			t.Fatalf("record %d: got offset %d ts %d key %q, want offset %d ts %d key %q (or value/headers differ)",
				i, g.Offset, g.Timestamp, g.Key, w.Offset, w.Timestamp, w.Key)
		}
	}
}

// TestCompressionTypeTransactions: with compression.type=zstd a
// transactional data batch is compressed and keeps its producer id, epoch
// and sequence (Kafka recompresses it with the same producer fields), and
// the COMMIT marker stays uncompressed (LogValidator: "Do not compress
// control records unless they are written compressed").
func TestCompressionTypeTransactions(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.CompressionType = CompressionZstd
	l := mustOpen(t, dir, cfg)
	if _, err := l.AppendTransactional(42, 3, codecRecords(3, 100, 1000)...); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EndTransaction(42, 3, true); err != nil {
		t.Fatal(err)
	}
	l.Close()
	all := entries(t, dir)
	if len(all) != 2 {
		t.Fatalf("%d batches, want 2", len(all))
	}
	data, _ := batch.ParseHeader(all[0], 0)
	marker, _ := batch.ParseHeader(all[1], 0)
	if data.Codec != batch.CodecZstd || !data.Transactional || data.ProducerID != 42 || data.ProducerEpoch != 3 || data.BaseSequence != 0 {
		t.Fatalf("transactional batch %+v", data)
	}
	if marker.Codec != batch.CodecNone || !marker.Control {
		t.Fatalf("marker %+v", marker)
	}
}

// TestCodecConfigValidate: bad values are named with the accepted ones;
// "" stands for the default.
func TestCodecConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.CompressionType != "producer" || cfg.MessageTimestampType != "CreateTime" {
		t.Fatalf("defaults %q %q", cfg.CompressionType, cfg.MessageTimestampType)
	}
	cfg.CompressionType, cfg.MessageTimestampType = "", ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.CompressionType, cfg.MessageTimestampType = "GZIP", "logappendtime"
	cfg.CompressionGzipLevel, cfg.CompressionLZ4Level, cfg.CompressionZstdLevel = 0, 0, 99
	err := cfg.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, s := range []string{`compression.type "GZIP": want one of [uncompressed zstd lz4 snappy gzip producer]`,
		`message.timestamp.type "logappendtime": want CreateTime or LogAppendTime`,
		`compression.gzip.level 0: want 1 to 9, or -1`, `compression.lz4.level 0: want 1 to 17`, `compression.zstd.level 99: want -131072 to 22`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%v\ndoes not say %s", err, s)
		}
	}
	if _, err := Open(t.TempDir(), cfg); err == nil {
		t.Fatal("Open accepted a bad config")
	}
}

// TestLogAppendTime: with message.timestamp.type=LogAppendTime each batch
// has the timestamp type bit and the append time as its max timestamp
// (baseTimestamp and the record deltas keep the create times, as Kafka's
// in-place path leaves them); readers see the append time for every
// record; the time index, the segment's max timestamp, OffsetForTimestamp
// and segment.ms use the append time, also after the indexes are rebuilt.
func TestLogAppendTime(t *testing.T) {
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, codecType := range []string{CompressionProducer, CompressionLZ4} {
		t.Run(codecType, func(t *testing.T) {
			dir := t.TempDir()
			cfg := smallConfig()
			cfg.MessageTimestampType, cfg.CompressionType = TimestampLogAppendTime, codecType
			cfg.SegmentMs, cfg.IndexIntervalBytes = 60_000, 0
			l := mustOpen(t, dir, cfg, WithClock(clock))
			// Create times a day apart would roll on every batch by
			// segment.ms=60000 under CreateTime; the append times are
			// 10 s apart, so 5 batches share one segment.
			var appended []int64
			for b := int64(0); b < 5; b++ {
				if _, err := l.Append(codecRecords(3, 300, old+b*86_400_000)...); err != nil {
					t.Fatal(err)
				}
				appended = append(appended, now.UnixMilli())
				now = now.Add(10 * time.Second)
			}
			if n := len(l.Segments()); n != 1 {
				t.Fatalf("%d segments, want 1: segment.ms must go by the append time", n)
			}
			// 61 s later the next batch rolls the segment.
			now = now.Add(51 * time.Second)
			if _, err := l.Append(codecRecords(1, 300, old)...); err != nil {
				t.Fatal(err)
			}
			appended = append(appended, now.UnixMilli())
			segs := l.Segments()
			if len(segs) != 2 || segs[1].BaseOffset != 15 {
				t.Fatalf("segments %+v, want a roll at offset 15", segs)
			}
			if segs[0].MaxTimestamp != appended[4] {
				t.Fatalf("first segment's max timestamp %d, want the last append time %d", segs[0].MaxTimestamp, appended[4])
			}
			for i, raw := range entries(t, dir) {
				b, _ := batch.ParseHeader(raw, 0)
				if b.TimestampType != batch.LogAppendTime || b.Attributes&0x08 == 0 || b.MaxTimestamp != appended[i] {
					t.Fatalf("batch %d: type %s max timestamp %d, want LogAppendTime %d", i, b.TimestampType, b.MaxTimestamp, appended[i])
				}
				if want := old + int64(i%5)*86_400_000; b.FirstTimestamp != want {
					t.Fatalf("batch %d: base timestamp %d, want the first create time %d", i, b.FirstTimestamp, want)
				}
				recs, err := batch.Records(raw, codec.Kafka)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					if r.Timestamp != appended[i] {
						t.Fatalf("record %d reads with timestamp %d, want the append time %d", r.Offset, r.Timestamp, appended[i])
					}
				}
			}
			// The rolled segment's .timeindex holds append times only.
			buf, err := os.ReadFile(filepath.Join(dir, kafkalog.FileName(0, kafkalog.TimeIndexSuffix)))
			if err != nil {
				t.Fatal(err)
			}
			times, err := index.ParseTimeIndex(buf, 0)
			if err != nil || len(times) == 0 {
				t.Fatalf("time index %v %v", times, err)
			}
			for _, e := range times {
				if e.Timestamp < appended[0] {
					t.Fatalf("time index entry %+v holds a create time", e)
				}
			}
			check := func() {
				t.Helper()
				// No record is older than its append time.
				if off, ts, err := l.OffsetForTimestamp(old); err != nil || off != 0 || ts != appended[0] {
					t.Fatalf("OffsetForTimestamp(create time) = %d, %d, %v; want 0 at %d", off, ts, err, appended[0])
				}
				if off, ts, err := l.OffsetForTimestamp(appended[2] + 1); err != nil || off != 9 || ts != appended[3] {
					t.Fatalf("OffsetForTimestamp = %d, %d, %v; want 9 at %d", off, ts, err, appended[3])
				}
			}
			check()
			// Rebuilt indexes give the same answers.
			l.Close()
			os.Remove(filepath.Join(dir, kafkalog.FileName(0, kafkalog.TimeIndexSuffix)))
			os.Remove(filepath.Join(dir, kafkalog.FileName(0, kafkalog.IndexSuffix)))
			l = mustOpen(t, dir, cfg, WithClock(clock))
			defer l.Close()
			if got := l.Segments()[0].MaxTimestamp; got != appended[4] {
				t.Fatalf("after rebuild: max timestamp %d, want %d", got, appended[4])
			}
			check()
		})
	}
}

// TestCreateTimeKeepsProducerTimestamps is TestLogAppendTime's control:
// the same batches under CreateTime keep their create times and roll by
// them.
func TestCreateTimeKeepsProducerTimestamps(t *testing.T) {
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cfg := smallConfig()
	cfg.SegmentMs = 60_000
	l := mustOpen(t, t.TempDir(), cfg, WithClock(func() time.Time { return now }))
	defer l.Close()
	for b := int64(0); b < 5; b++ {
		if _, err := l.Append(codecRecords(3, 300, old+b*86_400_000)...); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	if len(segs) != 5 || segs[0].MaxTimestamp != old+2 {
		t.Fatalf("segments %+v: want one per batch, the first's max timestamp %d", segs, old+2)
	}
	if off, ts, err := l.OffsetForTimestamp(old + 1); err != nil || off != 1 || ts != old+1 {
		t.Fatalf("OffsetForTimestamp = %d, %d, %v", off, ts, err)
	}
}

// TestCompressionLevels: compression.zstd.level and compression.gzip.level
// reach the writer: the same records take fewer bytes at a higher level,
// and read back the same.
func TestCompressionLevels(t *testing.T) {
	// Text with some entropy: words and numbers from a seeded source.
	rng := rand.New(rand.NewSource(7))
	words := strings.Fields("kafka segment offset batch record leader replica index log retention tiered remote copy object bucket order user page")
	recs := make([]Record, 40)
	for i := range recs {
		var v strings.Builder
		for v.Len() < 2000 {
			fmt.Fprintf(&v, "%s %d %s. ", words[rng.Intn(len(words))], rng.Intn(100000), words[rng.Intn(len(words))])
		}
		recs[i] = Record{Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(v.String()),
			Headers: []RecordHeader{{Key: "h", Value: []byte("v")}}, Timestamp: 1000}
	}
	size := func(ct string, set func(*Config)) int64 {
		t.Helper()
		dir := t.TempDir()
		cfg := smallConfig()
		cfg.CompressionType = ct
		set(&cfg)
		l := mustOpen(t, dir, cfg)
		for i := 0; i < len(recs); i += 8 {
			if _, err := l.Append(recs[i : i+8]...); err != nil {
				t.Fatal(err)
			}
		}
		n := l.Segments()[0].Size
		l.Close()
		var got []Record
		for _, raw := range entries(t, dir) {
			r, err := batch.Records(raw, codec.Kafka)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r...)
		}
		want := append([]Record(nil), recs...)
		for i := range want {
			want[i].Offset = int64(i)
		}
		sameRecords(t, got, want)
		return n
	}
	if lo, hi := size(CompressionZstd, func(c *Config) { c.CompressionZstdLevel = 1 }), size(CompressionZstd, func(c *Config) { c.CompressionZstdLevel = 19 }); hi >= lo {
		t.Errorf("zstd: %d bytes at level 19, %d at level 1", hi, lo)
	}
	if lo, hi := size(CompressionGzip, func(c *Config) { c.CompressionGzipLevel = 1 }), size(CompressionGzip, func(c *Config) { c.CompressionGzipLevel = 9 }); hi >= lo {
		t.Errorf("gzip: %d bytes at level 9, %d at level 1", hi, lo)
	}
}
