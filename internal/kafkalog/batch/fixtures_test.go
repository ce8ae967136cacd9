package batch_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// logSummary is what a whole .log decodes to.
type logSummary struct {
	entries, records   int
	first, last        int64 // first and last record offset (-1 when empty)
	control            int   // control batches
	noTimestamp        int   // records with timestamp -1
	legacy, v2         int   // entries by format
	gzip               int   // compressed entries
	leaderEpochs       map[int32]int
	controlTypes       []int16 // type of each control record, in order
	controlOffsets     []int64
	recordsPerBatchMax int
}

func summarize(t *testing.T, path string) logSummary {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	s := batch.NewScanner(f, st.Size(), batch.ScanOptions{VerifyCRC: true})
	sum := logSummary{first: -1, last: -1, leaderEpochs: map[int32]int{}}
	var prevLast int64 = -1
	for s.Next() {
		b := s.Batch()
		if !s.CRCValid() {
			t.Fatalf("%s: CRC mismatch at byte %d", path, b.Position)
		}
		raw, err := s.Raw()
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(raw, codec.Kafka)
		if err != nil {
			t.Fatalf("%s: records of entry at %d: %v", path, b.Position, err)
		}
		if err := b.InspectWrapper(raw, codec.Kafka); err != nil {
			t.Fatalf("%s: wrapper at %d: %v", path, b.Position, err)
		}
		if int(b.Count) != len(recs) {
			t.Fatalf("%s: entry at %d claims %d records, holds %d", path, b.Position, b.Count, len(recs))
		}
		if b.BaseOffset <= prevLast || recs[0].Offset != b.BaseOffset || recs[len(recs)-1].Offset != b.LastOffset {
			t.Fatalf("%s: entry at %d offsets %d..%d, records %d..%d, previous ended %d", path, b.Position,
				b.BaseOffset, b.LastOffset, recs[0].Offset, recs[len(recs)-1].Offset, prevLast)
		}
		prevLast = b.LastOffset
		sum.entries++
		sum.records += len(recs)
		sum.recordsPerBatchMax = max(sum.recordsPerBatchMax, len(recs))
		if sum.first < 0 {
			sum.first = recs[0].Offset
		}
		sum.last = b.LastOffset
		if b.Legacy() {
			sum.legacy++
		} else {
			sum.v2++
			sum.leaderEpochs[b.PartitionLeaderEpoch]++
		}
		if b.Codec == batch.CodecGzip {
			sum.gzip++
		}
		if b.Control {
			sum.control++
			for _, r := range recs {
				if len(r.Key) != 4 {
					t.Fatalf("%s: control record key of %d bytes", path, len(r.Key))
				}
				sum.controlTypes = append(sum.controlTypes, int16(binary.BigEndian.Uint16(r.Key[2:])))
				sum.controlOffsets = append(sum.controlOffsets, r.Offset)
			}
		}
		for _, r := range recs {
			if r.Timestamp == batch.NoTimestamp {
				sum.noTimestamp++
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if s.ValidEnd() != st.Size() {
		t.Fatalf("%s: scan ended at %d of %d bytes", path, s.ValidEnd(), st.Size())
	}
	return sum
}

// Control record types (ControlRecordType.java).
const (
	ctrlLeaderChange = 2
)

// TestRealFixtures checks every .log under the fixture directory against the
// values PROVENANCE.md gives (found there by an independent inspector).
func TestRealFixtures(t *testing.T) {
	root := testfixtures.Dir(t)
	type want struct {
		entries, records int
		first, last      int64
		legacy, gzip     int
		control          int
		noTimestamp      int // -1 means: not checked
	}
	cases := map[string]want{
		"ldi-kafka370-kraft/__cluster_metadata-0":                                                   {4814, 4929, 0, 4928, 0, 0, 1, 0},
		"ldi-kafka370-kraft/__consumer_offsets-6":                                                   {13, 13, 0, 12, 0, 0, 0, 0},
		"ldi-kafka370-kraft/TestTopicPatient-0":                                                     {3, 3, 0, 2, 0, 0, 0, 0},
		"ldi-kafka370-kraft/Retry.TestTopicPatient-0":                                               {0, 0, -1, -1, 0, 0, 0, 0},
		"berkay-kafkajs-gzip/kafka-data/topic-logx-001-0":                                           {17, 17, 0, 16, 0, 17, 0, 0},
		"berkay-kafkajs-gzip/kafka-data/topic-logx-001-1":                                           {16, 16, 0, 15, 0, 16, 0, 0},
		"berkay-kafkajs-gzip/kafka-data/topic-logx-001-2":                                           {17, 17, 0, 16, 0, 17, 0, 0},
		"iechenyb-2019-plain/kafka-logs/string-key-0":                                               {28068, 28162, 0, 28161, 0, 0, 0, -1},
		"iechenyb-2019-plain/kafka-logs/test-0921-0":                                                {1521, 1521, 0, 1520, 0, 0, 0, -1},
		"iechenyb-2019-plain/kafka-logs/__consumer_offsets-36":                                      {16, 16, 0, 15, 0, 0, 0, -1},
		"xpx-kafka0101-magic1/tmp/kafka-logs/TEST-TOPIC-0":                                          {21211, 21211, 0, 21210, 21211, 0, 0, 9000},
		"xpx-kafka0101-magic1/tmp/kafka-logs/__consumer_offsets-40":                                 {860, 860, 0, 859, 860, 0, 0, -1},
		"xpx-kafka0101-magic1/tmp/kafka-logs/foo-0":                                                 {204, 204, 0, 203, 204, 0, 0, -1},
		"xpx-kafka0101-magic1/tmp/kafka-logs/topic1-0":                                              {5, 5, 0, 4, 5, 0, 0, -1},
		"sharaweil-kafka0110/data/test0-0":                                                          {11, 11, 0, 10, 0, 0, 0, 0},
		"sharaweil-kafka0110/data/test0-1":                                                          {11, 11, 0, 10, 0, 0, 0, 0},
		"sharaweil-kafka0110/data/test0-2":                                                          {10, 11, 0, 10, 0, 0, 0, 0},
		"apache-kafka-pr-testdata/pr15553/core/data/kafka-2167572160391180112/__cluster_metadata-0": {23, 26, 0, 25, 0, 0, 2, 0},
		"apache-kafka-pr-testdata/pr15553/core/data/kafka-13294002803961715372/test-topic-0":        {1, 1, 0, 0, 0, 0, 0, 1},
		"apache-kafka-pr-testdata/pr15553/core/data/kafka-14696354110866436968/test-topic-0.2308294e39dc4a44ab8183f587805af2-delete": {1, 2, 0, 1, 0, 0, 0, 0},
		"apache-kafka-pr-testdata/pr63/core/data/kafka-573957/test-topic-1":                                                          {0, 0, -1, -1, 0, 0, 0, 0},
		"kafka-go-fetch-captures/derived/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc/test-88-0":                                          {15, 20, 0, 19, 7, 7, 0, 0},
		"kafka-go-fetch-captures/derived/v1-v1/test-edgy-0":                                                                          {4, 4, 0, 3, 4, 0, 0, 0},
		"kafka-go-fetch-captures/derived/v1c-v1-v1c/test-breezy-0":                                                                   {5, 6, 0, 5, 5, 3, 0, 0},
		"kafka-go-fetch-captures/derived/v1c-v1c/test-gutsy-0":                                                                       {3, 4, 0, 3, 3, 3, 0, 0},
		"kafka-go-fetch-captures/derived/v2-v2/test-lucid-0":                                                                         {2, 4, 0, 3, 0, 0, 0, 0},
		"kafka-go-fetch-captures/derived/v2b-v1/test-feisty-0":                                                                       {3, 4, 0, 3, 2, 0, 0, 0},
		"kafka-go-fetch-captures/derived/v2bc-v1/test-hardy-0":                                                                       {3, 4, 0, 3, 2, 1, 0, 0},
		"kafka-go-fetch-captures/derived/v2bc-v1-v1c/test-hardy-0":                                                                   {4, 6, 0, 5, 3, 2, 0, 0},
		"kafka-go-fetch-captures/derived/v2bc-v1c/test-karmic-0":                                                                     {2, 4, 0, 3, 1, 2, 0, 0},
		"kafka-go-fetch-captures/derived/v2c-v2-v2c/test-natty-0":                                                                    {3, 6, 0, 5, 0, 2, 0, 0},
		"kafka-go-fetch-captures/derived/v2c-v2c/test-oneiric-0":                                                                     {2, 4, 0, 3, 0, 2, 0, 0},
	}
	// Every .log in the fixtures must be in the table: a new fixture set
	// needs its expected values.
	seen := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		w, ok := cases[rel]
		if !ok {
			t.Errorf("fixture %s has no expected values", rel)
			return nil
		}
		seen++
		t.Run(rel, func(t *testing.T) {
			got := summarize(t, p)
			if got.entries != w.entries || got.records != w.records || got.first != w.first || got.last != w.last {
				t.Errorf("entries %d records %d offsets %d..%d; want %d %d %d..%d",
					got.entries, got.records, got.first, got.last, w.entries, w.records, w.first, w.last)
			}
			if got.legacy != w.legacy || got.v2 != w.entries-w.legacy {
				t.Errorf("legacy %d v2 %d; want legacy %d", got.legacy, got.v2, w.legacy)
			}
			if got.gzip != w.gzip || got.control != w.control {
				t.Errorf("gzip %d control %d; want %d %d", got.gzip, got.control, w.gzip, w.control)
			}
			if w.noTimestamp >= 0 && got.noTimestamp != w.noTimestamp {
				t.Errorf("%d records without timestamp, want %d", got.noTimestamp, w.noTimestamp)
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(cases) {
		t.Errorf("found %d fixture logs, table has %d", seen, len(cases))
	}
}

// TestFixtureDetails checks the particular facts PROVENANCE.md calls out.
func TestFixtureDetails(t *testing.T) {
	// KRaft metadata log of a 3.8 test run: LEADER_CHANGE control batches at
	// epoch 1 (offset 0) and epoch 2 (offset 25).
	meta := summarize(t, testfixtures.Path(t, "apache-kafka-pr-testdata/pr15553/core/data/kafka-2167572160391180112/__cluster_metadata-0/00000000000000000000.log"))
	if len(meta.controlTypes) != 2 || meta.controlTypes[0] != ctrlLeaderChange || meta.controlTypes[1] != ctrlLeaderChange {
		t.Errorf("control types %v, want two LEADER_CHANGE", meta.controlTypes)
	}
	if len(meta.controlOffsets) != 2 || meta.controlOffsets[1] != 25 {
		t.Errorf("control offsets %v, want second at 25", meta.controlOffsets)
	}
	if meta.leaderEpochs[1] == 0 || meta.leaderEpochs[2] == 0 {
		t.Errorf("leader epochs %v, want batches in epochs 1 and 2", meta.leaderEpochs)
	}
	// 3.7 KRaft: one LEADER_CHANGE at offset 0, every batch in epoch 1.
	kraft := summarize(t, testfixtures.Path(t, "ldi-kafka370-kraft/__cluster_metadata-0/00000000000000000000.log"))
	if len(kraft.controlOffsets) != 1 || kraft.controlOffsets[0] != 0 || kraft.controlTypes[0] != ctrlLeaderChange {
		t.Errorf("control records at %v types %v", kraft.controlOffsets, kraft.controlTypes)
	}
	if len(kraft.leaderEpochs) != 1 || kraft.leaderEpochs[1] != 4814 {
		t.Errorf("leader epochs %v, want all 4814 batches in epoch 1", kraft.leaderEpochs)
	}
	// string-key-0: 28,064 single-record batches, 2 of 8, 1 of 13, 1 of 69.
	sk := summarize(t, testfixtures.Path(t, "iechenyb-2019-plain/kafka-logs/string-key-0/00000000000000000000.log"))
	if sk.recordsPerBatchMax != 69 {
		t.Errorf("largest batch %d records, want 69", sk.recordsPerBatchMax)
	}
}

// TestIdempotentProducers checks the producer fields of 3 idempotent
// producers (pid 1/2/3, epoch 0, base sequence 0).
func TestIdempotentProducers(t *testing.T) {
	p := testfixtures.Path(t, "ldi-kafka370-kraft/TestTopicPatient-0/00000000000000000000.log")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	s := batch.NewScanner(f, st.Size(), batch.ScanOptions{})
	var pids []int64
	for s.Next() {
		b := s.Batch()
		if b.ProducerEpoch != 0 || b.BaseSequence != 0 {
			t.Errorf("batch at %d: producer epoch %d base sequence %d", b.Position, b.ProducerEpoch, b.BaseSequence)
		}
		pids = append(pids, b.ProducerID)
	}
	if len(pids) != 3 || pids[0] != 1 || pids[1] != 2 || pids[2] != 3 {
		t.Errorf("producer ids %v, want [1 2 3]", pids)
	}
}

// TestLegacyWrapperOffsets: a magic 1 gzip wrapper carries the offset of its
// last inner message; inner offsets are relative.
func TestLegacyWrapperOffsets(t *testing.T) {
	p := testfixtures.Path(t, "kafka-go-fetch-captures/derived/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc/test-88-0/00000000000000000000.log")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{})
	var last batch.Batch
	for s.Next() {
		last = s.Batch()
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if last.Magic != 1 || last.Codec != batch.CodecGzip || last.LastOffset != 19 || last.BaseOffset != -1 {
		t.Fatalf("last entry %+v, want a magic 1 gzip wrapper at 19 with unknown base", last)
	}
	recs, err := batch.Records(data[last.Position:last.End()], codec.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Offset != 18 || recs[1].Offset != 19 {
		t.Fatalf("inner offsets %v, want 18, 19", recs)
	}
	// InspectWrapper finds the same without keeping the records.
	in := last
	if err := in.InspectWrapper(data[last.Position:last.End()], codec.Kafka); err != nil || in.BaseOffset != 18 || in.Count != 2 || in.FirstTimestamp != recs[0].Timestamp {
		t.Fatalf("InspectWrapper: %+v %v", in, err)
	}
	// Without a decompressor that knows gzip, the error says so.
	if _, err := batch.Records(data[last.Position:last.End()], nil); err == nil {
		t.Fatal("no error without a decompressor")
	}
}

// TestSmallWindowSameResult: a scan whose window is smaller than the
// entries (legacy messages are then parsed from their length fields alone)
// gives the same entries and CRC results.
func TestSmallWindowSameResult(t *testing.T) {
	for _, rel := range []string{
		"kafka-go-fetch-captures/derived/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc/test-88-0/00000000000000000000.log",
		"xpx-kafka0101-magic1/tmp/kafka-logs/foo-0/00000000000000000000.log",
	} {
		data, err := os.ReadFile(testfixtures.Path(t, rel))
		if err != nil {
			t.Fatal(err)
		}
		scan := func(window int) (out []batch.Batch, crc []bool) {
			s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{VerifyCRC: true, BufferSize: window})
			for s.Next() {
				out, crc = append(out, s.Batch()), append(crc, s.CRCValid())
			}
			if s.Err() != nil {
				t.Fatalf("window %d: %v", window, s.Err())
			}
			return out, crc
		}
		a, ac := scan(0)
		b, bc := scan(24)
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("%s: %d vs %d entries", rel, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] || ac[i] != bc[i] || !bc[i] {
				t.Fatalf("%s entry %d: %+v vs %+v", rel, i, a[i], b[i])
			}
		}
	}
}
