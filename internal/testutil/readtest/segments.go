package readtest

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// txnIndexBytes encodes a .txnindex of txns.
// txnIndexBytes encodes .txnindex entries in Kafka's format: 34 bytes of
// version (int16), producer id, first offset, last offset and last stable
// offset (int64 each), big-endian.
func txnIndexBytes(txns ...index.AbortedTxn) []byte {
	var out []byte
	for _, x := range txns {
		out = binary.BigEndian.AppendUint16(out, uint16(x.Version))
		for _, v := range []int64{x.ProducerID, x.FirstOffset, x.LastOffset, x.LastStableOffset} {
			out = binary.BigEndian.AppendUint64(out, uint64(v))
		}
	}
	return out
}

// WriteSegment writes a segment's .log from whole entries, with the
// offset and time indexes a broker writes (an entry per batch after the
// first), and its .txnindex when txns are given.
func WriteSegment(t testing.TB, dir string, base int64, txns []index.AbortedTxn, entries ...[]byte) {
	t.Helper()
	var log []byte
	ib := index.NewBuilder(base, 0)
	for _, en := range entries {
		h, err := batch.ParseHeader(en, int64(len(log)))
		if err != nil {
			t.Fatal(err)
		}
		ib.Add(h.LastOffset, h.MaxTimestamp, h.Position, h.Size)
		log = append(log, en...)
	}
	if len(entries) > 0 {
		ib.Seal()
	}
	offs, err := index.EncodeOffsets(base, ib.Offsets)
	if err != nil {
		t.Fatal(err)
	}
	times, err := index.EncodeTimes(base, ib.Times)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{kafkalog.LogSuffix: log, kafkalog.IndexSuffix: offs, kafkalog.TimeIndexSuffix: times}
	if txns != nil {
		files[kafkalog.TxnIndexSuffix] = txnIndexBytes(txns...)
	}
	for suffix, data := range files {
		if err := os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, suffix)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Entry builds one v2 batch of n records from base, 5000-byte values and
// timestamps ts(offset); pid >= 0 makes it transactional.
func Entry(t testing.TB, base int64, n int, pid int64, ts func(int64) int64) []byte {
	t.Helper()
	p := batch.NewParams(base, 0)
	if pid >= 0 {
		p.Transactional, p.ProducerID, p.ProducerEpoch, p.BaseSequence = true, pid, 0, 0
	}
	recs := make([]batch.Record, n)
	for i := range recs {
		off := base + int64(i)
		recs[i] = batch.Record{Timestamp: ts(off), Value: bytes.Repeat([]byte{byte(off)}, 5000)}
	}
	b, err := batch.AppendBatch(nil, p, recs, codec.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Marker builds a transaction's control batch (Kafka's EndTxnMarker: key
// version and type, 0 abort / 1 commit; value version and coordinator
// epoch).
func Marker(t testing.TB, off, pid int64, commit bool) []byte {
	t.Helper()
	p := batch.NewParams(off, 0)
	p.Transactional, p.Control, p.ProducerID, p.ProducerEpoch, p.BaseSequence = true, true, pid, 0, -1
	typ := uint16(0)
	if commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0)
	b, err := batch.AppendBatch(nil, p, []batch.Record{{Timestamp: 1000 + off, Key: key, Value: val}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TxnLog writes and tiers four segments with transactions, as a broker
// lays them out (an aborted transaction's .txnindex entry goes with the
// segment holding its abort marker):
//
//	[0, 9]    0-1, pid 7 2-4, 5, abort 7 at 6, pid 8 7, 8-9  .txnindex {7: 2-6, LSO 7}
//	[10, 19]  pid 8 10-11, abort 8 at 12, pid 9 13-14, commit 9 at 15, 16-19
//	                                                          .txnindex {8: 7-12, LSO 13}
//	[20, 29]  20-29                                           no .txnindex
//	[30, 39]  pid 10 30-31, abort 10 at 32, 33-39             .txnindex {10: 30-32, LSO 33}
func TxnLog(t testing.TB, r *Rig) {
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ts := func(off int64) int64 { return 1000 + off }
	none := int64(-1)
	WriteSegment(t, dir, 0, []index.AbortedTxn{{ProducerID: 7, FirstOffset: 2, LastOffset: 6, LastStableOffset: 7}},
		Entry(t, 0, 2, none, ts), Entry(t, 2, 3, 7, ts), Entry(t, 5, 1, none, ts), Marker(t, 6, 7, false),
		Entry(t, 7, 1, 8, ts), Entry(t, 8, 2, none, ts))
	WriteSegment(t, dir, 10, []index.AbortedTxn{{ProducerID: 8, FirstOffset: 7, LastOffset: 12, LastStableOffset: 13}},
		Entry(t, 10, 2, 8, ts), Marker(t, 12, 8, false), Entry(t, 13, 2, 9, ts), Marker(t, 15, 9, true), Entry(t, 16, 4, none, ts))
	WriteSegment(t, dir, 20, nil, Entry(t, 20, 10, none, ts))
	WriteSegment(t, dir, 30, []index.AbortedTxn{{ProducerID: 10, FirstOffset: 30, LastOffset: 32, LastStableOffset: 33}},
		Entry(t, 30, 2, 10, ts), Marker(t, 32, 10, false), Entry(t, 33, 7, none, ts))
	WriteSegment(t, dir, 40, nil)
	r.TierEach(dir, func(meta *remotelog.SegmentMetadata, files *rsm.SegmentFiles) {
		p := filepath.Join(dir, kafkalog.FileName(meta.StartOffset, kafkalog.TxnIndexSuffix))
		if _, err := os.Stat(p); err == nil {
			files.TxnIndex = p
			meta.TxnIndexPresent = true
		}
	})
}
