package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/seglog"
)

// This file holds the codecs case: the same records written into one
// segment of the embedded log under each compression.type, with the
// segment's size on disk and the CPU seconds to write and to read it.

// codecValueBytes is the value size of the codecs case's records, bytes:
// the reference run's 5000-byte records.
const codecValueBytes = 5000

// codecsBatch is how many records the codecs case puts in a batch. Each
// batch is compressed on its own, as a producer's is.
const codecsBatch = 16

// codecVariants are the codecs compared, by the name the report gives
// them and their compression.type.
var codecVariants = []struct{ name, compressionType string }{
	{"none", seglog.CompressionUncompressed},
	{"gzip", seglog.CompressionGzip},
	{"snappy", seglog.CompressionSnappy},
	{"lz4", seglog.CompressionLZ4},
	{"zstd", seglog.CompressionZstd},
}

// codecWords is the vocabulary of the codecs case's text, most frequent
// first (the words are drawn with a Zipf distribution over this order).
const codecWords = "the of and to a in is that for it as was with be by on not he this are or his from at which but have an " +
	"they you were her she there been one all we their has would when if so no will more out up into do any your what " +
	"storage segment broker partition offset record batch consumer producer topic leader replica index log retention " +
	"tiered remote local copy object bucket request latency throughput compaction tombstone key value header timestamp " +
	"order customer payment shipped warehouse invoice account balance transfer pending settled refund item quantity price " +
	"region session user page view click search result cart checkout delivery address status error warning info debug " +
	"request response service node cluster metric counter gauge histogram second minute hour day week month year " +
	"because before after during between under over again further then once here where why how each few most other some " +
	"such only own same than too very can just should now also new first last long great little right old big high small"

// codecText returns n bytes of English-like text: sentences of 4 to 19
// words drawn from codecWords with a Zipf distribution (s = 1.2), one in
// ten words a number of up to six digits, as in event payloads and log
// lines. It compresses like prose (about 3x with gzip), unlike all-zero
// or random values.
func codecText(rng *rand.Rand, zipf *rand.Zipf, words []string, n int) []byte {
	var b bytes.Buffer
	b.Grow(n + 200)
	for b.Len() < n {
		k := 4 + rng.Intn(16)
		for i := range k {
			w := words[zipf.Uint64()]
			if rng.Intn(10) == 0 {
				w = strconv.Itoa(rng.Intn(1_000_000))
			}
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
			if i < k-1 {
				b.WriteByte(' ')
			}
		}
		b.WriteString(". ")
	}
	return b.Bytes()[:n]
}

// codecShapes are the codecs case's data shapes: "padded", the reference
// run's records (a short label padded to 5000 bytes with one
// repeated character, as its producer writes), on which the
// order is asserted; and "text", 5000 bytes of English-like text
// (codecText), closer to real payloads.
var codecShapes = []string{"padded", "text"}

// codecShapeRecords returns n records of the named shape (codecShapes).
func codecShapeRecords(shape string, n int, seed uint64, ts int64) []seglog.Record {
	if shape == "text" {
		return codecRecords(n, seed, ts)
	}
	recs := make([]seglog.Record, n)
	for i := range recs {
		key := "key-" + strconv.Itoa(i)
		v := bytes.Repeat([]byte{'.'}, codecValueBytes)
		copy(v, "value of "+key)
		recs[i] = seglog.Record{Key: []byte(key), Value: v, Timestamp: ts}
	}
	return recs
}

// codecRecords returns the text shape's records: n records with keys
// "key-N" and codecValueBytes of codecText each, seeded by seed, all
// stamped ts (ms).
func codecRecords(n int, seed uint64, ts int64) []seglog.Record {
	rng := rand.New(rand.NewSource(int64(seed)))
	words := strings.Fields(codecWords)
	zipf := rand.NewZipf(rng, 1.2, 1, uint64(len(words)-1))
	recs := make([]seglog.Record, n)
	for i := range recs {
		recs[i] = seglog.Record{Key: []byte("key-" + strconv.Itoa(i)), Value: codecText(rng, zipf, words, codecValueBytes), Timestamp: ts}
	}
	return recs
}

// codecRecordCount is how many records fill about 90% of one segment of
// segmentBytes uncompressed, so that no codec's log rolls.
func codecRecordCount(segmentBytes int64) int {
	return int(segmentBytes * 9 / 10 / (codecValueBytes + 30))
}

// codecStep is one codec's measures.
type codecStep struct {
	segmentBytes int64   // the segment's .log on disk
	writeCPU     float64 // CPU seconds to append every batch and close
	readCPU      float64 // CPU seconds to read and decode every record
}

// codecSegment writes recs, codecsBatch to a batch, into a new log at dir
// with compression.type ct and segment.bytes segmentBytes, then reads
// them all back with Read and decodes them, checking every key and value.
// Errors: the log's, a roll (the records must fit one segment), or a
// record read back wrong.
func codecSegment(dir, ct string, segmentBytes int64, recs []seglog.Record) (st codecStep, err error) {
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes, cfg.CompressionType = segmentBytes, ct
	cpu0 := selfCPUSeconds()
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		return st, err
	}
	for i := 0; i < len(recs); i += codecsBatch {
		if _, err := l.AppendBatch(batch.CodecNone, recs[i:min(i+codecsBatch, len(recs))]...); err != nil {
			l.Close()
			return st, err
		}
	}
	segs := l.Segments()
	if err := l.Close(); err != nil {
		return st, err
	}
	st.writeCPU = selfCPUSeconds() - cpu0
	if len(segs) != 1 {
		return st, fmt.Errorf("%s: %d records took %d segments of %d bytes, want one", ct, len(recs), len(segs), segmentBytes)
	}
	fi, err := os.Stat(filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix)))
	if err != nil {
		return st, err
	}
	st.segmentBytes = fi.Size()

	cpu0 = selfCPUSeconds()
	if l, err = seglog.Open(dir, cfg); err != nil {
		return st, err
	}
	defer l.Close()
	next := int64(0)
	for next < l.HighWatermark() {
		data, err := l.Read(next, 1<<20)
		if err != nil {
			return st, err
		}
		for p := 0; p < len(data); {
			b, err := batch.ParseHeader(data[p:], int64(p))
			if err != nil {
				return st, err
			}
			got, err := batch.Records(data[p:p+int(b.Size)], codec.Kafka)
			if err != nil {
				return st, err
			}
			for _, r := range got {
				if r.Offset != next || !bytes.Equal(r.Key, recs[next].Key) || !bytes.Equal(r.Value, recs[next].Value) {
					return st, fmt.Errorf("%s: offset %d read back as offset %d key %q", ct, next, r.Offset, r.Key)
				}
				next++
			}
			p += int(b.Size)
		}
	}
	st.readCPU = selfCPUSeconds() - cpu0
	return st, nil
}

// codecsCase runs the codecs case: for each data shape, the same
// codecRecordCount records in one segment of cfg.SegmentBytes under each
// codec, Rounds times (the sizes do not change between rounds; the CPU
// seconds do). Series variants are "<shape>/<codec>".
func (e *env) codecsCase(ctx context.Context) ([]*Series, error) {
	n := codecRecordCount(e.cfg.SegmentBytes)
	sizes := []int{n}
	var out []*Series
	ser := map[string]*Series{}
	for _, shape := range codecShapes {
		for _, v := range codecVariants {
			for _, m := range []string{"segment_bytes", "write_cpu_s", "read_cpu_s"} {
				k := shape + "/" + v.name + " " + m
				ser[k] = newSeries("codecs", shape+"/"+v.name, m, sizes, e.cfg.Rounds, false)
				out = append(out, ser[k])
			}
		}
	}
	for _, shape := range codecShapes {
		recs := codecShapeRecords(shape, n, e.cfg.Seed, 1_700_000_000_000)
		for r := range e.cfg.Rounds {
			for _, v := range codecVariants {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				dir := filepath.Join(e.dir, fmt.Sprintf("codecs-%s-%s-r%d", shape, v.name, r), "codecs-0")
				st, err := codecSegment(dir, v.compressionType, e.cfg.SegmentBytes, recs)
				os.RemoveAll(filepath.Dir(dir))
				if err != nil {
					return nil, fmt.Errorf("codecs/%s/%s: %w", shape, v.name, err)
				}
				k := shape + "/" + v.name
				ser[k+" segment_bytes"].set(r, 0, float64(st.segmentBytes))
				ser[k+" write_cpu_s"].set(r, 0, st.writeCPU)
				ser[k+" read_cpu_s"].set(r, 0, st.readCPU)
				e.logf("codecs/%s/%s (round %d): %d records of %d bytes in a %d-byte segment (none/%s %.2fx); write %.3f CPU-s, read %.3f CPU-s",
					shape, v.name, r+1, n, codecValueBytes, st.segmentBytes, v.name, ser[shape+"/none segment_bytes"].Values[r][0]/float64(st.segmentBytes), st.writeCPU, st.readCPU)
			}
		}
	}
	return out, nil
}

// codecTargets checks the target order of the codecs' segment sizes,
// zstd < gzip < lz4 < none, on the median sizes of the padded data
// shape (the target), and reports the text shape's order beside
// it (a line that is met when the same order holds there). Each line
// gives each size and each codec's ratio to none.
func (rep *Report) codecTargets() []Target {
	var out []Target
	for _, shape := range codecShapes {
		order := []string{"zstd", "gzip", "lz4", "none"}
		var vals []float64
		for _, name := range order {
			s := rep.series("codecs", shape+"/"+name, "segment_bytes")
			if s == nil {
				return out
			}
			sp, ok := spreadOf(s.at(0))
			if !ok {
				return out
			}
			vals = append(vals, sp.med)
		}
		met := true
		var parts []string
		for i, name := range order {
			met = met && (i == 0 || vals[i-1] < vals[i])
			parts = append(parts, fmt.Sprintf("%s %s (%.2fx)", name, fmtNum(vals[i]), vals[len(vals)-1]/vals[i]))
		}
		text := "codecs segment bytes zstd < gzip < lz4 < none, " + shape + " shape: " + strings.Join(parts, ", ")
		if shape != "padded" {
			text += " (informational: real payloads vary)"
		}
		out = append(out, Target{Text: text, Met: met})
	}
	return out
}
