package index

import "testing"

func TestAppendAbortedTxnRoundTrip(t *testing.T) {
	in := []AbortedTxn{{ProducerID: 7, FirstOffset: 10, LastOffset: 20, LastStableOffset: 21}, {ProducerID: -2, FirstOffset: 1 << 40, LastOffset: 1<<40 + 5, LastStableOffset: 1<<40 + 9}}
	var buf []byte
	for _, e := range in {
		buf = AppendAbortedTxn(buf, e)
	}
	if len(buf) != len(in)*TxnEntrySize {
		t.Fatalf("%d bytes, want %d", len(buf), len(in)*TxnEntrySize)
	}
	out, err := ParseTxnIndex(buf)
	if err != nil || len(out) != len(in) || out[0] != in[0] || out[1] != in[1] {
		t.Fatalf("parsed %+v, %v; want %+v", out, err, in)
	}
}
