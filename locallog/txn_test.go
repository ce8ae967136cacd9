package locallog

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// ent describes one v2 batch to write by hand.
type ent struct {
	base    int64
	n       int   // records (data batches)
	pid     int64 // 0: not idempotent
	txn     bool  // transactional
	control bool  // a transaction marker
	commit  bool  // the marker's type: commit, else abort
	codec   batch.Codec
	ts      int64  // first record's timestamp; 0: 1_700_000_000_000 + offset
	val     []byte // every record's value; nil: value(offset, 40)
}

func (e ent) encode(t testing.TB) []byte {
	t.Helper()
	p := batch.NewParams(e.base, 0)
	p.Codec = e.codec
	if e.pid != 0 {
		p.ProducerID, p.ProducerEpoch, p.BaseSequence = e.pid, 0, int32(e.base)
	}
	p.Transactional, p.Control = e.txn, e.control
	var recs []batch.Record
	if e.control {
		typ := byte(0) // abort
		if e.commit {
			typ = 1
		}
		recs = []batch.Record{{Key: []byte{0, 0, 0, typ}, Value: []byte{0, 0, 0, 0, 0, 0}, Timestamp: 1_700_000_000_000 + e.base}}
		p.BaseSequence = -1
	} else {
		for i := 0; i < e.n; i++ {
			ts := e.ts + int64(i)
			if e.ts == 0 {
				ts = 1_700_000_000_000 + e.base + int64(i)
			}
			v := e.val
			if v == nil {
				v = value(e.base+int64(i), 40)
			}
			recs = append(recs, batch.Record{Value: v, Timestamp: ts})
		}
	}
	out, err := batch.AppendBatch(nil, p, recs, codec.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeSegment writes (or appends to) the .log of base in dir.
func writeSegment(t testing.TB, dir string, base int64, ents ...ent) {
	t.Helper()
	f, err := os.OpenFile(segPath(dir, base, kafkalog.LogSuffix), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, e := range ents {
		if _, err := f.Write(e.encode(t)); err != nil {
			t.Fatal(err)
		}
	}
}

func partitionDir(t testing.TB) string {
	dir := filepath.Join(t.TempDir(), "txns-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLastStableOffset follows the transactions of three producers across
// a rolled and an active segment appended to entry by entry: a
// transactional data batch opens a transaction, a marker closes it, the
// oldest open one bounds the last stable offset, and a high watermark
// below a marker keeps its transaction open.
func TestLastStableOffset(t *testing.T) {
	dir := partitionDir(t)
	writeSegment(t, dir, 0,
		ent{base: 0, n: 2, pid: 1, txn: true},
		ent{base: 2, n: 1},
		ent{base: 3, n: 2, pid: 2, txn: true},
		ent{base: 5, n: 1, pid: 1, txn: true},
		ent{base: 6, pid: 1, txn: true, control: true, commit: true},
	)
	writeSegment(t, dir, 7)
	p := mustOpen(t, dir, Options{})
	steps := []struct {
		add     ent
		hw, lso int64
	}{
		{ent{}, 7, 3}, // P2 open since 3; P1 committed at 6
		{ent{base: 7, n: 1, pid: 2, txn: true}, 8, 3},
		{ent{base: 8, n: 1, pid: 3, txn: true}, 9, 3},
		{ent{base: 9, pid: 2, txn: true, control: true}, 10, 8}, // P2 aborted: P3 is the oldest
		{ent{base: 10, n: 1, pid: 1, txn: true}, 11, 8},
		{ent{base: 11, pid: 3, txn: true, control: true, commit: true}, 12, 10},
		{ent{base: 12, pid: 1, txn: true, control: true, commit: true}, 13, 13},
	}
	for _, s := range steps {
		if s.add.base > 0 {
			writeSegment(t, dir, 7, s.add)
		}
		o, err := p.Offsets()
		if err != nil {
			t.Fatal(err)
		}
		if want := (Offsets{LocalLogStartOffset: 0, HighWatermark: s.hw, LastStableOffset: s.lso}); o != want {
			t.Fatalf("after the entry at %d: Offsets = %+v, want %+v", s.add.base, o, want)
		}
	}
	// Read with the last stable offset as the limit stops before the
	// first open transaction.
	p2 := mustOpen(t, dir, Options{HighWatermark: func() (int64, bool) { return 10, true }})
	o, err := p2.Offsets()
	if err != nil || o.HighWatermark != 10 || o.LastStableOffset != 8 {
		t.Fatalf("high watermark 10: Offsets = %+v, %v; want HW 10, LSO 8", o, err)
	}
	p3 := mustOpen(t, dir, Options{HighWatermark: func() (int64, bool) { return 9, true }})
	if o, err := p3.Offsets(); err != nil || o.LastStableOffset != 3 {
		t.Fatalf("high watermark 9 (below P2's abort marker): Offsets = %+v, %v; want LSO 3", o, err)
	}
	data, err := p3.Read(0, 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ents := parseEntries(t, data); len(ents) != 2 || ents[1].LastOffset != 2 {
		t.Fatalf("Read up to the last stable offset 3: %d entries", len(ents))
	}
	if data, err := p3.Read(3, 1<<20, 3); err != nil || len(data) != 0 {
		t.Fatalf("Read at the last stable offset: %d bytes, %v", len(data), err)
	}

	// Once the rolled segment is deleted, P2's transaction (opened at 3)
	// is seen as opened at 7: transactions opened before the local log
	// start offset are not visible.
	if err := os.Remove(segPath(dir, 0, kafkalog.LogSuffix)); err != nil {
		t.Fatal(err)
	}
	p4 := mustOpen(t, dir, Options{HighWatermark: func() (int64, bool) { return 9, true }})
	if o, err := p4.Offsets(); err != nil || o != (Offsets{LocalLogStartOffset: 7, HighWatermark: 9, LastStableOffset: 7}) {
		t.Fatalf("without the rolled segment: Offsets = %+v, %v", o, err)
	}
}

func txnIndexBytes(entries ...index.AbortedTxn) []byte {
	var out []byte
	for _, e := range entries {
		out = binary.BigEndian.AppendUint16(out, uint16(e.Version))
		out = binary.BigEndian.AppendUint64(out, uint64(e.ProducerID))
		out = binary.BigEndian.AppendUint64(out, uint64(e.FirstOffset))
		out = binary.BigEndian.AppendUint64(out, uint64(e.LastOffset))
		out = binary.BigEndian.AppendUint64(out, uint64(e.LastStableOffset))
	}
	return out
}

// TestAbortedTxns reads hand-written .txnindex files: the overlap rule,
// an entry kept in a later segment than its transaction's data, order by
// first offset, a missing file, a truncated file (whole entries), an
// active segment's index that grows, and an unknown version.
func TestAbortedTxns(t *testing.T) {
	dir := partitionDir(t)
	writeSegment(t, dir, 0, ent{base: 0, n: 7})
	writeSegment(t, dir, 7, ent{base: 7, n: 3})
	writeSegment(t, dir, 10, ent{base: 10, n: 4})
	p5 := index.AbortedTxn{ProducerID: 5, FirstOffset: 4, LastOffset: 6, LastStableOffset: 3}
	p2 := index.AbortedTxn{ProducerID: 2, FirstOffset: 3, LastOffset: 9, LastStableOffset: 3}
	p7 := index.AbortedTxn{ProducerID: 7, FirstOffset: 10, LastOffset: 11, LastStableOffset: 10}
	write := func(base int64, data []byte) {
		if err := os.WriteFile(segPath(dir, base, kafkalog.TxnIndexSuffix), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(0, txnIndexBytes(p5))
	write(7, append(txnIndexBytes(p2), 1, 2, 3, 4, 5)) // a partial trailing entry
	// Segment 10 has no .txnindex yet.
	p := mustOpen(t, dir, Options{})
	cases := []struct {
		from, to int64
		want     []index.AbortedTxn
	}{
		{0, 14, []index.AbortedTxn{p2, p5}},
		{0, 3, nil},
		{0, 4, []index.AbortedTxn{p2}}, // P2's entry sits in segment 7
		{7, 8, []index.AbortedTxn{p2}},
		{9, 10, []index.AbortedTxn{p2}},
		{10, 14, nil},
		{5, 5, nil},
	}
	check := func() {
		t.Helper()
		for _, c := range cases {
			got, err := p.AbortedTxns(c.from, c.to)
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("AbortedTxns(%d, %d) = %v, %v; want %v", c.from, c.to, got, err, c.want)
			}
		}
	}
	check()
	write(10, txnIndexBytes(p7)) // the active segment's index appears
	cases[0].want = []index.AbortedTxn{p2, p5, p7}
	cases[5].want = []index.AbortedTxn{p7}
	check()
	bad := p7
	bad.Version = 3
	write(10, txnIndexBytes(p7, bad))
	if _, err := p.AbortedTxns(10, 14); !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Fatalf("unknown version: %v, want ErrCorrupt", err)
	} else {
		assertCorruptIn(t, err, segPath(dir, 10, kafkalog.TxnIndexSuffix))
	}
}
