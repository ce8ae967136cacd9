package compact

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

func concat(entries ...[]byte) []byte {
	var out []byte
	for _, e := range entries {
		out = append(out, e...)
	}
	return out
}

// split cuts a .log's bytes into entries.
func split(t *testing.T, data []byte) [][]byte {
	var out [][]byte
	for p := 0; p < len(data); {
		b, err := batch.ParseHeader(data[p:], int64(p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data[p:p+int(b.Size)])
		p += int(b.Size)
	}
	return out
}

func TestCompactSegmentsMergesCopies(t *testing.T) {
	const pid = 3
	segs := []Segment{
		{Log: concat(mk(t, 0, nil, rec("a", "1", 1), rec("b", "1", 1)), mk(t, 2, txn(pid, 0, 0), rec("a", "aborted", 2))), End: 3},
		{Log: concat(marker(t, 3, pid, 0, false), mk(t, 4, nil, rec("b", tomb, 4))), End: 5},
		{Log: concat(mk(t, 5, nil, rec("c", "1", 5)), mk(t, 6, nil, rec("c", "2", 6))), End: 7},
	}
	aborted := []index.AbortedTxn{{ProducerID: pid, FirstOffset: 2, LastOffset: 3, LastStableOffset: 4}}
	out, kept, err := CompactSegments(segs, 0, Options{NowMs: 50, DeleteRetentionMs: 10, Aborted: aborted})
	if err != nil {
		t.Fatal(err)
	}
	entries := split(t, out)
	if got, want := fmt.Sprint(flat(t, entries)), "[0:a=1 4:b=<nil> 6:c=2]"; got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
	if last := header(t, entries[len(entries)-1]); last.LastOffset != 6 {
		t.Fatalf("output ends at %d, want 6", last.LastOffset)
	}
	if len(kept) != 1 || kept[0] != aborted[0] {
		t.Fatalf("kept txnindex entries %+v", kept)
	}
	// A second cleaning past the tombstone's horizon drops it; the last
	// batch of the range (here the tombstone's, moved last) stays, empty,
	// so the output still ends at the range's end.
	tail := []Segment{{Log: concat(mk(t, 0, nil, rec("a", "1", 1)), mk(t, 1, nil, rec("b", tomb, 1))), End: 2}}
	first, _, err := CompactSegments(tail, 0, Options{NowMs: 50, DeleteRetentionMs: 10})
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := CompactSegments([]Segment{{Log: first, End: 2}}, 0, Options{NowMs: 60, DeleteRetentionMs: 10})
	if err != nil {
		t.Fatal(err)
	}
	entries = split(t, second)
	if got := fmt.Sprint(flat(t, entries)); got != "[0:a=1]" || len(entries) != 2 {
		t.Fatalf("second cleaning kept %s in %d batches", got, len(entries))
	}
	if b := header(t, entries[1]); b.Count != 0 || b.LastOffset != 1 {
		t.Fatalf("last batch %+v, want an empty batch ending at 1", b)
	}
}

func TestCompactSegmentsRefusesBadCRC(t *testing.T) {
	e := mk(t, 0, nil, rec("a", "1", 1))
	e[len(e)-1] ^= 1
	_, _, err := CompactSegments([]Segment{{Log: e, End: 1}}, 0, Options{})
	if !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Fatalf("err = %v, want corruption", err)
	}
}
