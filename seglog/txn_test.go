package seglog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// TestTransactions: an aborted transaction interleaved with a committed
// one gives transactional batches, COMMIT/ABORT control batches and one
// .txnindex entry whose last stable offset is the still open
// transaction's first offset.
func TestTransactions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l, err := Open(dir, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustOff := func(off int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	mustOff(l.Append(Record{Value: []byte("plain")}))                           // 0
	a := mustOff(l.AppendTransactional(7, 0, Record{Value: []byte("a1")}))      // 1
	c := mustOff(l.AppendTransactional(8, 0, Record{Value: []byte("c1")}))      // 2
	mustOff(l.AppendTransactional(7, 0, Record{Value: []byte("a2")}, Record{})) // 3,4
	abort := mustOff(l.EndTransaction(7, 0, false))                             // 5
	commit := mustOff(l.EndTransaction(8, 0, true))                             // 6
	if _, err := l.EndTransaction(8, 0, true); !errors.Is(err, ErrNoTransaction) {
		t.Fatalf("second end: %v, want ErrNoTransaction", err)
	}
	data, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []batch.Batch
	for p := 0; p < len(data); {
		b, err := batch.ParseHeader(data[p:], int64(p))
		if err != nil {
			t.Fatal(err)
		}
		if !batch.CheckCRC(data[p : p+int(b.Size)]) {
			t.Fatalf("batch at %d: bad CRC", b.BaseOffset)
		}
		got = append(got, b)
		p += int(b.Size)
	}
	if len(got) != 6 {
		t.Fatalf("%d batches, want 6", len(got))
	}
	if got[0].Transactional || !got[1].Transactional || got[1].ProducerID != 7 || got[3].BaseSequence != 1 {
		t.Fatalf("data batches: %+v", got[:4])
	}
	if !got[4].Control || got[4].BaseOffset != abort || !got[5].Control || got[5].BaseOffset != commit {
		t.Fatalf("markers: %+v %+v", got[4], got[5])
	}
	buf, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.txnindex"))
	if err != nil {
		t.Fatal(err)
	}
	txns, err := index.ParseTxnIndex(buf)
	if err != nil {
		t.Fatal(err)
	}
	want := index.AbortedTxn{ProducerID: 7, FirstOffset: a, LastOffset: abort, LastStableOffset: c}
	if len(txns) != 1 || txns[0] != want {
		t.Fatalf("txnindex %+v, want [%+v]", txns, want)
	}
}
