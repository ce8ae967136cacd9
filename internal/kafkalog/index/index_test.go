package index_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

func encodeOffsets(t testing.TB, base int64, es []index.OffsetEntry) []byte {
	var buf []byte
	var err error
	for _, e := range es {
		if buf, err = index.AppendOffsetEntry(buf, base, e); err != nil {
			t.Fatal(err)
		}
	}
	return buf
}

func encodeTimes(t testing.TB, base int64, es []index.TimeEntry) []byte {
	var buf []byte
	var err error
	for _, e := range es {
		if buf, err = index.AppendTimeEntry(buf, base, e); err != nil {
			t.Fatal(err)
		}
	}
	return buf
}

func TestOffsetIndexRealEnd(t *testing.T) {
	const base = 1000
	want := []index.OffsetEntry{{1003, 4730}, {1007, 9571}, {1011, 14000}}
	raw := encodeOffsets(t, base, want)
	cases := map[string]struct {
		buf     []byte
		corrupt bool // bytes after the real end are not zero
	}{
		"trimmed":          {raw, false},
		"preallocated":     {append(bytes.Clone(raw), make([]byte, 8*1000)...), false},
		"garbage after":    {append(bytes.Clone(raw), encodeOffsets(t, base, []index.OffsetEntry{{1005, 20000}})...), true},
		"position repeats": {append(bytes.Clone(raw), encodeOffsets(t, base, []index.OffsetEntry{{1012, 14000}})...), true},
	}
	for name, tc := range cases {
		got, err := index.ParseOffsetIndex(tc.buf, base)
		if tc.corrupt != errors.Is(err, kafkalog.ErrCorrupt) || len(got) != len(want) {
			t.Fatalf("%s: %v entries, err %v", name, got, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: entry %d = %+v, want %+v", name, i, got[i], want[i])
			}
		}
	}
	if got, err := index.ParseOffsetIndex(make([]byte, 1<<20), base); err != nil || len(got) != 0 {
		t.Errorf("all-zero index: %v, %v", got, err)
	}
	got, err := index.ParseOffsetIndex(raw[:len(raw)-3], base)
	var ce *kafkalog.CorruptionError
	if !errors.As(err, &ce) || ce.Position != 16 || len(got) != 2 {
		t.Errorf("truncated index: entries %v, err %v", got, err)
	}
	if _, err := index.ParseOffsetIndex(encodeOffsets(t, 0, nil), base); err != nil {
		t.Errorf("empty index: %v", err)
	}
	neg := []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}
	if _, err := index.ParseOffsetIndex(neg, base); !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Errorf("negative entry 0: %v", err)
	}
}

func TestTimeIndexRealEnd(t *testing.T) {
	const base = 50
	want := []index.TimeEntry{{1000, 52}, {1500, 60}, {1700, 60}}
	raw := encodeTimes(t, base, want)
	for name, buf := range map[string][]byte{
		"trimmed":           raw,
		"preallocated":      append(bytes.Clone(raw), make([]byte, 12*100)...),
		"timestamp repeats": append(bytes.Clone(raw), encodeTimes(t, base, []index.TimeEntry{{1700, 70}})...),
		"offset goes back":  append(bytes.Clone(raw), encodeTimes(t, base, []index.TimeEntry{{1800, 59}})...),
	} {
		got, err := index.ParseTimeIndex(buf, base)
		wantErr := name == "timestamp repeats" || name == "offset goes back"
		if wantErr != errors.Is(err, kafkalog.ErrCorrupt) || len(got) != 3 || got[2] != want[2] {
			t.Errorf("%s: %v, %v", name, got, err)
		}
	}
	if _, err := index.ParseTimeIndex(raw, math.MaxInt64-5); !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Errorf("overflowing base offset: %v", err)
	}
	got, err := index.ParseTimeIndex(append(bytes.Clone(raw), 1, 2, 3), base)
	var ce *kafkalog.CorruptionError
	if !errors.As(err, &ce) || ce.Position != 36 || len(got) != 3 {
		t.Errorf("partial entry: %v, %v", got, err)
	}
}

// TestTimeIndexFirstEntryAtZero: records with timestamp 0 at the base
// offset make the broker's first time index entry (0, base): twelve zero
// bytes, like preallocated padding, and yet a real entry when entries
// follow it (Kafka's TimeIndex starts from (-1, base) and appends any
// larger timestamp). The Builder writes the same as the broker.
func TestTimeIndexFirstEntryAtZero(t *testing.T) {
	const base = 50
	b := index.NewBuilder(base, 0)
	for i, ts := range []int64{0, 0, 5, 6, 9} { // one-record batches of 10 bytes
		b.Add(base+int64(i), ts, int64(10*i), 10)
	}
	b.Seal()
	_, raw, err := b.Encode(base)
	if err != nil {
		t.Fatal(err)
	}
	want := []index.TimeEntry{{0, base}, {5, base + 2}, {6, base + 3}, {9, base + 4}}
	if !bytes.Equal(raw, encodeTimes(t, base, want)) {
		t.Fatalf("the builder's time index %x, want the entries %v", raw, want)
	}
	for name, buf := range map[string][]byte{"trimmed": raw, "preallocated": append(bytes.Clone(raw), make([]byte, 12*100)...)} {
		got, err := index.ParseTimeIndex(buf, base)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %v, %v; want %v", name, got, err, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: entry %d = %+v, want %+v", name, i, got[i], want[i])
			}
		}
	}
	// Alone, (0, base) cannot be told from padding; either way a lookup
	// starts at the base offset.
	if got, err := index.ParseTimeIndex(make([]byte, 12*10), base); err != nil || len(got) > 1 {
		t.Errorf("all zero: %v, %v", got, err)
	}
}

func TestLookup(t *testing.T) {
	offs := []index.OffsetEntry{{10, 100}, {20, 200}, {30, 300}}
	for _, tc := range []struct {
		target int64
		want   int32
		ok     bool
	}{{5, 0, false}, {10, 100, true}, {15, 100, true}, {29, 200, true}, {30, 300, true}, {1 << 40, 300, true}} {
		e, ok := index.LookupOffset(offs, tc.target)
		if ok != tc.ok || e.Position != tc.want {
			t.Errorf("LookupOffset(%d) = %+v %v, want position %d %v", tc.target, e, ok, tc.want, tc.ok)
		}
	}
	times := []index.TimeEntry{{1000, 5}, {2000, 9}, {3000, 14}}
	for _, tc := range []struct {
		ts   int64
		want int64
		ok   bool
	}{{999, 0, false}, {1000, 0, false}, {1001, 5, true}, {2500, 9, true}, {3000, 9, true}, {9999, 14, true}} {
		e, ok := index.LookupTime(times, tc.ts)
		if ok != tc.ok || (ok && e.Offset != tc.want) {
			t.Errorf("LookupTime(%d) = %+v %v, want offset %d %v", tc.ts, e, ok, tc.want, tc.ok)
		}
	}
	if _, ok := index.LookupOffset(nil, 5); ok {
		t.Error("lookup in empty index found an entry")
	}
}

func TestAppendRejectsOutOfRange(t *testing.T) {
	if _, err := index.AppendOffsetEntry(nil, 100, index.OffsetEntry{Offset: 99}); err == nil {
		t.Error("offset below base accepted")
	}
	if _, err := index.AppendTimeEntry(nil, 0, index.TimeEntry{Offset: 1 << 32}); err == nil {
		t.Error("offset beyond int32 accepted")
	}
}

func TestTxnIndex(t *testing.T) {
	if got, err := index.ParseTxnIndex(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	e := make([]byte, 34)
	e[9] = 7  // producer id 7
	e[17] = 3 // first offset 3
	e[25] = 9 // last offset 9
	got, err := index.ParseTxnIndex(append(e, 1))
	if !errors.Is(err, kafkalog.ErrCorrupt) || len(got) != 1 || got[0].ProducerID != 7 || got[0].FirstOffset != 3 || got[0].LastOffset != 9 {
		t.Fatalf("got %+v %v", got, err)
	}
}

// TestRealIndexes checks the fixture indexes against PROVENANCE.md.
func TestRealIndexes(t *testing.T) {
	root := testfixtures.Dir(t)
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Large trimmed indexes of a clean shutdown (log not committed).
	for i, wantTimes := range []int{3387, 3388, 3372} {
		dir := filepath.Join("berkay-index-only/kafka-data", "topic-logx-001-"+string(rune('0'+i)))
		raw := read(filepath.Join(dir, "00000000000000000000.index"))
		offs, err := index.ParseOffsetIndex(raw, 0)
		if err != nil || len(offs) != 3856 || len(offs)*8 != len(raw) {
			t.Errorf("%s: %d offset entries, err %v", dir, len(offs), err)
		}
		if i == 0 && (offs[0] != index.OffsetEntry{Offset: 6, Position: 4794} || offs[len(offs)-1].Offset != 23136) {
			t.Errorf("%s: first %+v last %+v", dir, offs[0], offs[len(offs)-1])
		}
		if len(offs) > 0 && offs[len(offs)-1].Position < 18_400_000 {
			t.Errorf("%s: last position %d, want about 18.48 MB", dir, offs[len(offs)-1].Position)
		}
		times, err := index.ParseTimeIndex(read(filepath.Join(dir, "00000000000000000000.timeindex")), 0)
		if err != nil || len(times) != wantTimes {
			t.Errorf("%s: %d time entries, want %d, err %v", dir, len(times), wantTimes, err)
		}
	}
	// A 1 MiB preallocated index that is all zeros: no entries.
	raw := read("apache-kafka-pr-testdata/pr63/core/data/kafka-573957/test-topic-1/00000000000000000000.index")
	if offs, err := index.ParseOffsetIndex(raw, 0); err != nil || len(offs) != 0 || len(raw) != 1<<20 {
		t.Errorf("pr63: %d entries of %d bytes, err %v", len(offs), len(raw), err)
	}
	// Clean shutdown of 0.11: empty .index, one .timeindex entry.
	for _, p := range []string{"test0-0", "test0-1", "test0-2"} {
		dir := filepath.Join("sharaweil-kafka0110/data", p)
		if offs, err := index.ParseOffsetIndex(read(filepath.Join(dir, "00000000000000000000.index")), 0); err != nil || len(offs) != 0 {
			t.Errorf("%s: %v %v", dir, offs, err)
		}
		times, err := index.ParseTimeIndex(read(filepath.Join(dir, "00000000000000000000.timeindex")), 0)
		if err != nil || len(times) != 1 || times[0].Offset != 10 {
			t.Errorf("%s: time entries %v, err %v", dir, times, err)
		}
	}
}

// TestRealIndexOnBatchBoundaries: each offset index entry of a real segment
// points at the start of a batch whose last offset is the entry's offset,
// and each time index entry at a batch holding its timestamp.
func TestRealIndexOnBatchBoundaries(t *testing.T) {
	dir := testfixtures.Path(t, "ldi-kafka370-kraft/__consumer_offsets-6")
	logData, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	byPos := map[int64]batch.Batch{}
	byLast := map[int64]batch.Batch{}
	s := batch.NewScanner(bytes.NewReader(logData), int64(len(logData)), batch.ScanOptions{})
	for s.Next() {
		b := s.Batch()
		byPos[b.Position], byLast[b.LastOffset] = b, b
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "00000000000000000000.index"))
	offs, err := index.ParseOffsetIndex(raw, 0)
	if err != nil || len(offs) != 2 {
		t.Fatalf("%v %v", offs, err)
	}
	if (offs[0] != index.OffsetEntry{Offset: 3, Position: 4730}) || (offs[1] != index.OffsetEntry{Offset: 7, Position: 9571}) {
		t.Errorf("entries %v, want 3->4730, 7->9571", offs)
	}
	for _, e := range offs {
		b, ok := byPos[int64(e.Position)]
		if !ok || b.LastOffset != e.Offset {
			t.Errorf("entry %+v: batch at that position %+v (found %v)", e, b, ok)
		}
	}
	raw, _ = os.ReadFile(filepath.Join(dir, "00000000000000000000.timeindex"))
	times, err := index.ParseTimeIndex(raw, 0)
	if err != nil || len(times) != 3 {
		t.Fatalf("%v %v", times, err)
	}
	for _, e := range times {
		b, ok := byLast[e.Offset]
		if !ok || b.MaxTimestamp != e.Timestamp {
			t.Errorf("time entry %+v: batch ending there %+v", e, b)
		}
	}
}

func FuzzParseIndexes(f *testing.F) {
	f.Add(encodeOffsets(f, 0, []index.OffsetEntry{{3, 4730}, {7, 9571}}), int64(0))
	f.Add(encodeTimes(f, 5, []index.TimeEntry{{100, 6}, {200, 9}}), int64(5))
	f.Add(make([]byte, 37), int64(1<<40))
	f.Fuzz(func(t *testing.T, data []byte, base int64) {
		base &= 1<<62 - 1 // file names hold offsets far below int64's end
		offs, _ := index.ParseOffsetIndex(data, base)
		if len(offs)*index.OffsetEntrySize > len(data) {
			t.Fatalf("%d offset entries from %d bytes", len(offs), len(data))
		}
		for i := 1; i < len(offs); i++ {
			if offs[i].Offset <= offs[i-1].Offset || offs[i].Position <= offs[i-1].Position {
				t.Fatalf("offset entries not increasing: %v", offs)
			}
		}
		times, _ := index.ParseTimeIndex(data, base)
		if len(times)*index.TimeEntrySize > len(data) {
			t.Fatalf("%d time entries from %d bytes", len(times), len(data))
		}
		for i := 1; i < len(times); i++ {
			if times[i].Timestamp <= times[i-1].Timestamp || times[i].Offset < times[i-1].Offset {
				t.Fatalf("time entries not increasing: %v", times)
			}
		}
		txns, _ := index.ParseTxnIndex(data)
		if len(txns)*index.TxnEntrySize > len(data) {
			t.Fatalf("%d txn entries from %d bytes", len(txns), len(data))
		}
	})
}
