package compact

import (
	"fmt"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"math"
	"testing"
)

// TestDeleteHorizonSaturates checks that delete.retention.ms of
// Long.MAX_VALUE keeps a tombstone for good: now + delete.retention.ms
// must saturate, not wrap to a horizon in the past that the next cleaning
// would pass.
func TestDeleteHorizonSaturates(t *testing.T) {
	in := [][]byte{mk(t, 0, nil, rec("a", "1", 1)), mk(t, 1, nil, rec("a", tomb, 2), rec("b", "1", 2))}
	out, _ := pass(t, in, 0, Options{NowMs: 1000, DeleteRetentionMs: math.MaxInt64})
	if h, ok := DeleteHorizon(header(t, out[len(out)-1])); !ok || h != math.MaxInt64 {
		t.Fatalf("delete horizon %d %v, want %d (saturated)", h, ok, int64(math.MaxInt64))
	}
	out, fd := dirty(t, out, "z")
	again, _ := pass(t, out, fd, Options{NowMs: 2000, DeleteRetentionMs: math.MaxInt64})
	if got, want := fmt.Sprint(flat(t, again)), "[1:a=<nil> 2:b=1 3:z=1]"; got != want {
		t.Fatalf("second pass kept %s, want %s (the tombstone stays)", got, want)
	}
}

// TestAbortedBeforeFirstDirtyDoesNotHideLaterTransactions checks Kafka's
// collectAbortedTransactions(firstDirty, end) rule for the offset map: an
// aborted transaction whose marker is below the first dirty offset is over
// and must not make the producer's later, committed transaction look
// aborted (its keys then never entered the map and older values of them
// survived every pass).
func TestAbortedBeforeFirstDirtyDoesNotHideLaterTransactions(t *testing.T) {
	in := [][]byte{
		mk(t, 0, txn(7, 0, 0), rec("a", "aborted", 1)),
		marker(t, 1, 7, 0, false),
		mk(t, 2, nil, rec("a", "old", 2)),
		mk(t, 3, txn(7, 0, 1), rec("a", "new", 3)),
		marker(t, 4, 7, 0, true),
	}
	aborted := []index.AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2}}
	out, _ := pass(t, in, 3, Options{NowMs: 10, DeleteRetentionMs: 100, Aborted: aborted})
	if got, want := fmt.Sprint(flat(t, out)), "[3:a=new]"; got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
}

// TestFilterIgnoresAbortedTransactionsEndedBeforeItsInput runs
// CompactSegments over segments that start after an aborted transaction
// of the producer ended (remote compaction of a later range): that
// transaction must not make the producer's committed records there look
// aborted, which would drop them.
func TestFilterIgnoresAbortedTransactionsEndedBeforeItsInput(t *testing.T) {
	seg := concat(
		mk(t, 2, nil, rec("b", "1", 2)),
		mk(t, 3, txn(7, 0, 1), rec("a", "committed", 3)),
		marker(t, 4, 7, 0, true),
	)
	aborted := []index.AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2}}
	out, _, err := CompactSegments([]Segment{{Log: seg, End: 5}}, 2, Options{NowMs: 10, DeleteRetentionMs: 100, Aborted: aborted, Compressor: batch.Stdlib, Decompressor: batch.Stdlib})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(flat(t, split(t, out))), "[2:b=1 3:a=committed]"; got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
}

// TestDuplicateKeysInOneCompressedBatch checks that within one batch
// (compressed, each codec the stdlib has) only the last record of a key
// stays, a tombstone last in the batch stays with a horizon, and the
// records kept are byte for byte the originals.
func TestDuplicateKeysInOneCompressedBatch(t *testing.T) {
	for _, c := range []batch.Codec{batch.CodecNone, batch.CodecGzip} {
		r := rec("b", "keep", 4)
		r.Headers = []batch.RecordHeader{{Key: "h", Value: []byte{}}, {Key: "n"}}
		in := [][]byte{
			mk(t, 0, func(p *batch.Params) { p.Codec = c },
				rec("a", "1", 1), rec("a", tomb, 2), rec("a", "3", 3), r, rec("c", "1", 5), rec("c", tomb, 6)),
		}
		out, _ := pass(t, in, 0, Options{NowMs: 100, DeleteRetentionMs: 50})
		if got, want := fmt.Sprint(flat(t, out)), "[2:a=3 3:b=keep 5:c=<nil>]"; got != want {
			t.Fatalf("%s: kept %s, want %s", c, got, want)
		}
		b := header(t, out[0])
		if h, ok := DeleteHorizon(b); !ok || h != 150 || b.Codec != c || b.BaseOffset != 0 || b.LastOffset != 5 {
			t.Fatalf("%s: header %+v", c, b)
		}
		recs, err := batch.Records(out[0], batch.Stdlib)
		if err != nil {
			t.Fatal(err)
		}
		hs := recs[1].Headers
		if recs[0].Timestamp != 3 || recs[1].Timestamp != 4 || recs[2].Timestamp != 6 || len(hs) != 2 ||
			hs[0].Value == nil || len(hs[0].Value) != 0 || hs[1].Value != nil {
			t.Fatalf("%s: records %+v", c, recs)
		}
	}
}
