package compact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// rec is a record for a test batch; a nil value is a tombstone.
func rec(key, value string, ts int64) batch.Record {
	r := batch.Record{Timestamp: ts}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "\x00" {
		r.Value = []byte(value)
	}
	return r
}

const tomb = "\x00" // rec value meaning null

// mk encodes one v2 batch at base, adjusted by set (may be nil).
func mk(t testing.TB, base int64, set func(*batch.Params), recs ...batch.Record) []byte {
	t.Helper()
	p := batch.NewParams(base, 3)
	if set != nil {
		set(&p)
	}
	raw, err := batch.AppendBatch(nil, p, recs, batch.Stdlib)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func marker(t testing.TB, base, pid int64, epoch int16, commit bool) []byte {
	kind := uint16(controlAbort)
	if commit {
		kind = controlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), kind)
	return mk(t, base, func(p *batch.Params) {
		p.Transactional, p.Control, p.ProducerID, p.ProducerEpoch = true, true, pid, epoch
	}, batch.Record{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}, Timestamp: 10})
}

func txn(pid int64, epoch int16, seq int32) func(*batch.Params) {
	return func(p *batch.Params) {
		p.Transactional, p.ProducerID, p.ProducerEpoch, p.BaseSequence = true, pid, epoch, seq
	}
}

// pass runs one cleaning over entries with the dirty range from
// firstDirty and returns the kept entries and the filter.
func pass(t testing.TB, entries [][]byte, firstDirty int64, o Options) ([][]byte, *Filter) {
	t.Helper()
	if o.Decompressor == nil {
		o.Decompressor, o.Compressor = batch.Stdlib, batch.Stdlib
	}
	m := NewOffsetMap(firstDirty, o.Aborted, o.Decompressor)
	for _, e := range entries {
		b, err := batch.ParseHeader(e, 0)
		if err != nil {
			t.Fatal(err)
		}
		if b.LastOffset < firstDirty {
			continue
		}
		if err := m.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	f := NewFilter(m, o)
	var out [][]byte
	for _, e := range entries {
		kept, res, err := f.Batch(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		if (res.Action == Dropped) != (len(kept) == 0) {
			t.Fatalf("action %s with %d bytes", res.Action, len(kept))
		}
		if len(kept) > 0 {
			if !batch.CheckCRC(kept) {
				t.Fatalf("kept batch has a bad CRC")
			}
			out = append(out, kept)
		}
	}
	return out, f
}

// dirty appends a batch with one new key after entries and returns the
// longer list and the batch's offset, the first dirty offset of a later
// pass (a cleaning only happens when something is dirty).
func dirty(t testing.TB, entries [][]byte, key string) ([][]byte, int64) {
	t.Helper()
	return dirtyAt(t, entries, header(t, entries[len(entries)-1]).LastOffset+1, key)
}

// dirtyAt is dirty with the new batch at offset next.
func dirtyAt(t testing.TB, entries [][]byte, next int64, key string) ([][]byte, int64) {
	t.Helper()
	return append(append([][]byte(nil), entries...), mk(t, next, nil, rec(key, "1", 1))), next
}

// flat lists the records of entries as "offset:key=value" ("key=<nil>"
// for tombstones).
func flat(t testing.TB, entries [][]byte) []string {
	t.Helper()
	var out []string
	for _, e := range entries {
		recs, err := batch.Records(e, batch.Stdlib)
		if err != nil {
			t.Fatal(err)
		}
		if header(t, e).Control {
			continue
		}
		for _, r := range recs {
			v := "<nil>"
			if r.Value != nil {
				v = string(r.Value)
			}
			out = append(out, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, v))
		}
	}
	return out
}

func header(t testing.TB, raw []byte) batch.Batch {
	t.Helper()
	b, err := batch.ParseHeader(raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLatestValuePerKeyWins(t *testing.T) {
	in := [][]byte{
		mk(t, 0, nil, rec("a", "1", 100), rec("b", "1", 101), rec("c", "1", 102)),
		mk(t, 3, nil, rec("a", "2", 103)),
		mk(t, 4, nil, rec("b", "2", 104), rec("a", "3", 105)),
	}
	out, _ := pass(t, in, 0, Options{NowMs: 1000, DeleteRetentionMs: 100})
	got := fmt.Sprint(flat(t, out))
	if want := "[2:c=1 4:b=2 5:a=3]"; got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
	// The first batch keeps its base offset and last offset delta: offsets
	// 0 and 1 become a gap, not a renumbering.
	b := header(t, out[0])
	if b.BaseOffset != 0 || b.LastOffset != 2 || b.Count != 1 || b.FirstTimestamp != 102 || b.MaxTimestamp != 102 {
		t.Fatalf("rewritten header %+v", b)
	}
	// The middle batch went entirely.
	if len(out) != 2 {
		t.Fatalf("%d batches kept, want 2", len(out))
	}
	if !bytes.Equal(out[1], in[2]) {
		t.Fatal("a batch whose records all stay is not kept byte for byte")
	}
}

func TestRecordsBelowFirstDirtyAreNotMappedButKept(t *testing.T) {
	// Offsets 0..1 are the clean section (cleaned before): a key there that
	// the dirty section does not repeat stays.
	in := [][]byte{
		mk(t, 0, nil, rec("a", "1", 1), rec("b", "1", 1)),
		mk(t, 2, nil, rec("a", "2", 2)),
	}
	out, _ := pass(t, in, 2, Options{NowMs: 10})
	if got, want := fmt.Sprint(flat(t, out)), "[1:b=1 2:a=2]"; got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
}

func TestNullKeysAreDropped(t *testing.T) {
	in := [][]byte{mk(t, 0, nil, rec("", "x", 1), rec("a", "1", 1))}
	out, _ := pass(t, in, 0, Options{NowMs: 10})
	if got, want := fmt.Sprint(flat(t, out)), "[1:a=1]"; got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
}

func TestRecordsPastTheMapStay(t *testing.T) {
	// The map covers offsets up to 1 only; the filter leaves later records
	// alone, duplicates included.
	in := [][]byte{mk(t, 0, nil, rec("a", "1", 1), rec("a", "2", 1)), mk(t, 2, nil, rec("a", "3", 1), rec("a", "4", 1))}
	m := NewOffsetMap(0, nil, nil)
	if err := m.Add(in[0]); err != nil {
		t.Fatal(err)
	}
	f := NewFilter(m, Options{NowMs: 5})
	var out [][]byte
	for _, e := range in {
		kept, _, err := f.Batch(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		if len(kept) > 0 {
			out = append(out, kept)
		}
	}
	if got, want := fmt.Sprint(flat(t, out)), "[1:a=2 2:a=3 3:a=4]"; got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
	if m.LatestOffset() != 1 {
		t.Fatalf("latest offset %d, want 1", m.LatestOffset())
	}
}

func TestTombstoneTwoPasses(t *testing.T) {
	in := [][]byte{
		mk(t, 0, nil, rec("a", "1", 100), rec("b", "1", 100)),
		mk(t, 2, nil, rec("a", tomb, 200), rec("c", "1", 201)),
	}
	// First pass: the tombstone stays and its batch gets a delete horizon.
	out, _ := pass(t, in, 0, Options{NowMs: 1000, DeleteRetentionMs: 100})
	if got, want := fmt.Sprint(flat(t, out)), "[1:b=1 2:a=<nil> 3:c=1]"; got != want {
		t.Fatalf("first pass kept %s, want %s", got, want)
	}
	b := header(t, out[1])
	if h, ok := DeleteHorizon(b); !ok || h != 1100 {
		t.Fatalf("delete horizon %d %v, want 1100", h, ok)
	}
	recs, _ := batch.Records(out[1], nil)
	if recs[0].Timestamp != 200 || recs[1].Timestamp != 201 || b.MaxTimestamp != 201 {
		t.Fatalf("record timestamps %d %d max %d, want 200 201 201", recs[0].Timestamp, recs[1].Timestamp, b.MaxTimestamp)
	}
	// A pass before the horizon keeps everything as it is.
	out, fd := dirty(t, out, "z")
	again, _ := pass(t, out, fd, Options{NowMs: 1099, DeleteRetentionMs: 100})
	if len(again) != 3 || !bytes.Equal(again[1], out[1]) {
		t.Fatal("a pass before the horizon changed the tombstone's batch")
	}
	// A pass at the horizon drops the tombstone; the horizon stays set.
	last, _ := pass(t, out, fd, Options{NowMs: 1100, DeleteRetentionMs: 100})
	if got, want := fmt.Sprint(flat(t, last)), "[1:b=1 3:c=1 4:z=1]"; got != want {
		t.Fatalf("after the horizon kept %s, want %s", got, want)
	}
	if h, ok := DeleteHorizon(header(t, last[1])); !ok || h != 1100 {
		t.Fatalf("delete horizon after rewrite %d %v, want 1100 kept", h, ok)
	}
}

func TestTombstoneSupersededGoesAtOnce(t *testing.T) {
	in := [][]byte{mk(t, 0, nil, rec("a", tomb, 1)), mk(t, 1, nil, rec("a", "2", 2))}
	out, _ := pass(t, in, 0, Options{NowMs: 10, DeleteRetentionMs: 1000})
	if got, want := fmt.Sprint(flat(t, out)), "[1:a=2]"; got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
}

func TestRewriteKeepsHeaderFieldsAndCodec(t *testing.T) {
	hs := []batch.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "n"}}
	r1, r2, r3 := rec("a", "1", 50), rec("b", "1", 60), rec("a", "2", 70)
	r2.Headers = hs
	in := [][]byte{mk(t, 10, func(p *batch.Params) {
		p.Codec, p.ProducerID, p.ProducerEpoch, p.BaseSequence, p.PartitionLeaderEpoch = batch.CodecGzip, 42, 5, 1000, 7
	}, r1, r2, r3)}
	out, _ := pass(t, in, 0, Options{NowMs: 100})
	b, orig := header(t, out[0]), header(t, in[0])
	if b.Codec != batch.CodecGzip || b.ProducerID != 42 || b.ProducerEpoch != 5 || b.BaseSequence != 1000 ||
		b.PartitionLeaderEpoch != 7 || b.BaseOffset != 10 || b.LastOffset != 12 || b.Count != 2 ||
		b.Attributes != orig.Attributes || b.FirstTimestamp != 60 || b.MaxTimestamp != 70 {
		t.Fatalf("rewritten header %+v", b)
	}
	recs, err := batch.Records(out[0], batch.Stdlib)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Offset != 11 || len(recs[0].Headers) != 2 || recs[0].Headers[1].Value != nil ||
		string(recs[0].Headers[0].Value) != "v" || recs[1].Offset != 12 || string(recs[1].Value) != "2" {
		t.Fatalf("records %+v", recs)
	}
	if err := b.CheckRecords(out[0]); err != nil && b.Codec == batch.CodecNone {
		t.Fatal(err)
	}
}

func TestLogAppendTimeKeepsMaxTimestamp(t *testing.T) {
	in := [][]byte{mk(t, 0, func(p *batch.Params) { p.TimestampType = batch.LogAppendTime },
		rec("a", "1", 500), rec("a", "2", 500))}
	out, _ := pass(t, in, 0, Options{NowMs: 1000})
	b := header(t, out[0])
	if b.TimestampType != batch.LogAppendTime || b.MaxTimestamp != 500 {
		t.Fatalf("header %+v", b)
	}
	if err := b.CheckRecords(out[0]); err != nil {
		t.Fatal(err)
	}
}

func TestAbortedTransactionLifecycle(t *testing.T) {
	const pid = 7
	in := [][]byte{
		mk(t, 0, txn(pid, 1, 0), rec("a", "aborted", 1), rec("b", "aborted", 1)),
		mk(t, 2, nil, rec("c", "1", 2)),
		marker(t, 3, pid, 1, false),
	}
	aborted := []index.AbortedTxn{{ProducerID: pid, FirstOffset: 0, LastOffset: 3, LastStableOffset: 4}}
	// Pass 1: the aborted batch goes; its marker stays (its batches were
	// read in this pass) and so does its .txnindex entry.
	out, f := pass(t, in, 0, Options{NowMs: 1000, DeleteRetentionMs: 100, Aborted: aborted})
	if got, want := fmt.Sprint(flat(t, out)), "[2:c=1]"; got != want {
		t.Fatalf("pass 1 kept %s, want %s", got, want)
	}
	if len(out) != 2 || !bytes.Equal(out[1], in[2]) {
		t.Fatal("pass 1 did not keep the abort marker as it was")
	}
	kept := f.AbortedKept()
	if len(kept) != 1 || kept[0] != aborted[0] {
		t.Fatalf("aborted kept %+v", kept)
	}
	// Pass 2: no batch of the transaction is left, so the marker gets a
	// delete horizon; the .txnindex entry is no longer needed.
	out, fd := dirty(t, out, "z")
	out2, f2 := pass(t, out, fd, Options{NowMs: 2000, DeleteRetentionMs: 100, Aborted: kept})
	if len(out2) != 3 {
		t.Fatalf("pass 2 kept %d batches, want 2", len(out2))
	}
	if h, ok := DeleteHorizon(header(t, out2[1])); !ok || h != 2100 {
		t.Fatalf("marker horizon %d %v, want 2100", h, ok)
	}
	if len(f2.AbortedKept()) != 0 {
		t.Fatalf("pass 2 kept txnindex entries %+v", f2.AbortedKept())
	}
	// Pass 3 before the horizon keeps the marker; at the horizon it goes.
	out2, fd = dirty(t, out2, "y")
	if out3, _ := pass(t, out2, fd, Options{NowMs: 2099, DeleteRetentionMs: 100}); len(out3) != 4 {
		t.Fatalf("pass before the horizon kept %d batches, want 2", len(out3))
	}
	out4, _ := pass(t, out2, fd, Options{NowMs: 2100, DeleteRetentionMs: 100})
	if len(out4) != 3 || fmt.Sprint(flat(t, out4)) != "[2:c=1 4:z=1 5:y=1]" {
		t.Fatalf("pass at the horizon kept %s", flat(t, out4))
	}
}

func TestAbortedRecordsDoNotEnterTheMap(t *testing.T) {
	const pid = 9
	in := [][]byte{
		mk(t, 0, nil, rec("a", "good", 1)),
		mk(t, 1, txn(pid, 0, 0), rec("a", "aborted", 2)),
		marker(t, 2, pid, 0, false),
	}
	aborted := []index.AbortedTxn{{ProducerID: pid, FirstOffset: 1, LastOffset: 2, LastStableOffset: 3}}
	out, _ := pass(t, in, 0, Options{NowMs: 10, Aborted: aborted})
	if got, want := fmt.Sprint(flat(t, out)), "[0:a=good]"; got != want || len(out) != 2 {
		t.Fatalf("kept %q, want %q", got, want)
	}
}

func TestCommittedTransactionMarker(t *testing.T) {
	const pid = 8
	in := [][]byte{
		mk(t, 0, txn(pid, 0, 0), rec("a", "1", 1)),
		marker(t, 1, pid, 0, true),
		mk(t, 2, nil, rec("a", "2", 2)),
	}
	// Pass 1: the committed record is superseded and its batch goes, but
	// the batch was read, so the COMMIT marker stays untouched.
	out, _ := pass(t, in, 0, Options{NowMs: 100, DeleteRetentionMs: 10})
	if len(out) != 2 || !bytes.Equal(out[0], in[1]) {
		t.Fatalf("pass 1 kept %d batches", len(out))
	}
	// Pass 2: horizon set; pass 3 after it: gone.
	out, fd := dirty(t, out, "z")
	out2, _ := pass(t, out, fd, Options{NowMs: 200, DeleteRetentionMs: 10})
	if h, ok := DeleteHorizon(header(t, out2[0])); !ok || h != 210 {
		t.Fatalf("commit marker horizon %d %v", h, ok)
	}
	out2, fd = dirty(t, out2, "y")
	out3, _ := pass(t, out2, fd, Options{NowMs: 210, DeleteRetentionMs: 10})
	if got, want := fmt.Sprint(flat(t, out3)), "[2:a=2 3:z=1 4:y=1]"; got != want || len(out3) != 3 {
		t.Fatalf("pass 3 kept %s, want %s", got, want)
	}
}

func TestLeaderChangeControlRecordStays(t *testing.T) {
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), 3)
	in := [][]byte{mk(t, 0, func(p *batch.Params) { p.Control = true }, batch.Record{Key: key, Value: []byte{0}, Timestamp: 1})}
	out, _ := pass(t, in, 0, Options{NowMs: 1 << 40})
	if len(out) != 1 || !bytes.Equal(out[0], in[0]) {
		t.Fatal("a LEADER_CHANGE control batch was not kept as it was")
	}
}

func TestActiveProducerLastBatchKeptEmpty(t *testing.T) {
	const pid = 11
	in := [][]byte{
		mk(t, 0, func(p *batch.Params) {
			p.ProducerID, p.ProducerEpoch, p.BaseSequence, p.Codec = pid, 2, 40, batch.CodecGzip
		},
			rec("a", "1", 70), rec("b", "1", 80)),
		mk(t, 2, nil, rec("a", "2", 90), rec("b", "2", 90)),
	}
	out, _ := pass(t, in, 0, Options{NowMs: 100, ActiveProducers: map[int64]Producer{pid: {LastDataOffset: 1, Epoch: 2}}})
	if len(out) != 2 {
		t.Fatalf("kept %d batches, want 2", len(out))
	}
	b := header(t, out[0])
	if b.Count != 0 || b.BaseOffset != 0 || b.LastOffset != 1 || b.ProducerID != pid || b.ProducerEpoch != 2 ||
		b.BaseSequence != 40 || b.Codec != batch.CodecNone || b.FirstTimestamp != 80 || b.MaxTimestamp != 80 || b.Size != batch.HeaderSize {
		t.Fatalf("empty batch header %+v", b)
	}
	// Without the producer being active the batch goes.
	if out, _ := pass(t, in, 0, Options{NowMs: 100}); len(out) != 1 {
		t.Fatalf("kept %d batches without an active producer, want 1", len(out))
	}
}

func TestUpperBoundKeepsLastBatch(t *testing.T) {
	in := [][]byte{mk(t, 0, nil, rec("a", "1", 1)), mk(t, 1, nil, rec("a", "2", 1), rec("a", "3", 1)), mk(t, 3, nil, rec("a", "4", 1))}
	out, _ := pass(t, in[:2], 0, Options{NowMs: 5, UpperBound: 3})
	// The map covers [0, 3): offset 2 is the latest for "a".
	if got := fmt.Sprint(flat(t, out)); got != "[2:a=3]" {
		t.Fatalf("kept %s", got)
	}
	m := NewOffsetMap(0, nil, nil)
	for _, e := range in {
		_ = m.Add(e)
	}
	f := NewFilter(m, Options{NowMs: 5, UpperBound: 1})
	kept, res, err := f.Batch(nil, in[0])
	if err != nil || res.Action != KeptEmpty || header(t, kept).LastOffset != 0 {
		t.Fatalf("batch ending at the upper bound: %s %v", res.Action, err)
	}
}

func TestLegacyEntriesKept(t *testing.T) {
	// A magic 1 message: offset, size, crc, magic, attributes, timestamp,
	// key, value.
	msg := binary.BigEndian.AppendUint64(nil, 0)
	body := []byte{1, 0}
	body = binary.BigEndian.AppendUint64(body, 5)
	body = binary.BigEndian.AppendUint32(body, 1)
	body = append(body, 'a')
	body = binary.BigEndian.AppendUint32(body, 1)
	body = append(body, 'x')
	msg = binary.BigEndian.AppendUint32(msg, uint32(4+len(body)))
	msg = binary.BigEndian.AppendUint32(msg, crcIEEE(body))
	msg = append(msg, body...)
	in := [][]byte{msg, mk(t, 1, nil, rec("a", "2", 1))}
	out, _ := pass(t, in, 0, Options{NowMs: 5})
	if len(out) != 2 || !bytes.Equal(out[0], msg) {
		t.Fatal("legacy message not kept as it was")
	}
}

func TestActiveProducerLastMarkerKept(t *testing.T) {
	const pid = 12
	in := [][]byte{
		mk(t, 0, txn(pid, 4, 0), rec("a", "1", 1)),
		marker(t, 1, pid, 4, true),
		mk(t, 2, nil, rec("a", "2", 2)),
	}
	out, _ := pass(t, in, 0, Options{NowMs: 100, DeleteRetentionMs: 10})
	out, fd := dirty(t, out, "z")
	out, _ = pass(t, out, fd, Options{NowMs: 200, DeleteRetentionMs: 10})
	out, fd = dirty(t, out, "y")
	// Past the marker's horizon, an active producer whose last entry is
	// this marker keeps it, empty.
	active := map[int64]Producer{pid: {LastDataOffset: -1, Epoch: 4}}
	kept, _ := pass(t, out, fd, Options{NowMs: 300, DeleteRetentionMs: 10, ActiveProducers: active})
	b := header(t, kept[0])
	if !b.Control || b.Count != 0 || b.BaseOffset != 1 || b.ProducerEpoch != 4 {
		t.Fatalf("kept %+v, want the empty marker", b)
	}
	gone, _ := pass(t, out, fd, Options{NowMs: 300, DeleteRetentionMs: 10})
	if header(t, gone[0]).Control {
		t.Fatal("the marker of an inactive producer stayed past its horizon")
	}
}

func TestCoverJudgesTrailingGap(t *testing.T) {
	m := NewOffsetMap(5, nil, nil)
	m.Cover(4)
	if m.LatestOffset() != -1 {
		t.Fatalf("a range ending before the map's start moved the latest offset to %d", m.LatestOffset())
	}
	// An empty dirty range: the map covers what lies below its start (a
	// pass with nothing dirty judges the whole cleaned range).
	m.Cover(5)
	if m.LatestOffset() != 4 {
		t.Fatalf("empty dirty range: latest offset %d, want 4", m.LatestOffset())
	}
	m.Cover(9)
	if m.LatestOffset() != 8 {
		t.Fatalf("latest offset %d, want 8", m.LatestOffset())
	}
}
