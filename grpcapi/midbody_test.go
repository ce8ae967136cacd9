package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
)

// stalled returns e with its server replaced by one on a real socket
// over e's bucket whose .log bodies fail after n bytes (a connection
// reset mid-body), e's metadata store shared.
func stalled(t *testing.T, e *env, n int64) *env {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 60000
	cfg.PrefetchBytes = 0
	mgr, err := rsm.NewManager(stallBucket{Bucket: e.Bucket, n: n, fail: true}, rsm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := *e
	s.serve(cfg, mgr)
	return &s
}

// A load failing mid-body after three whole batches: FetchStream, the
// unary Fetch over gRPC and the client (which reads with FetchStream)
// answer alike, with those three batches and next_offset 3, and the
// stream ends OK, as Fetch does.
func TestFetchStreamLoadFailsMidBody(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	e = stalled(t, e, 20000)
	ctx := context.Background()
	req := &tierdpb.FetchRequest{Topic: "t", Offset: 0, MaxBytes: 1 << 20}
	recs, next, _, err := e.fetchStream(ctx, req)
	if err != nil {
		t.Fatalf("FetchStream: %v, want the batches that arrived", err)
	}
	if bs := readtest.Batches(t, recs); len(bs) != 3 || next != 3 {
		t.Fatalf("FetchStream: %d batches, next %d; want 3, 3", len(bs), next)
	}
	resp, err := e.api.Fetch(ctx, req)
	if err != nil || !bytes.Equal(resp.Records, recs) || resp.NextOffset != 3 {
		t.Fatalf("Fetch: %v, %d bytes, next %d; want FetchStream's %d bytes, next 3", err, len(resp.GetRecords()), resp.GetNextOffset(), len(recs))
	}
	b, err := e.client.Partition("t", 0).Fetch(ctx, 0, 1<<20, tierdpb.IsolationLevel_READ_UNCOMMITTED)
	if err != nil || !bytes.Equal(b.Records, recs) || b.NextOffset != 3 {
		t.Fatalf("client Fetch: %v, next %d", err, b.NextOffset)
	}
	b.Release()
}

// READ_COMMITTED, a load failing mid-body inside the abort marker at
// offset 6, after offsets 0-5 (pid 7's aborted records 2-4 among them)
// arrived whole: the answer holds offsets 0-5 and lists pid 7's aborted
// transaction, through FetchStream and the client; without the list a
// read_committed consumer would take the aborted records for committed.
func TestReadCommittedLoadFailsMidBody(t *testing.T) {
	none := int64(-1)
	ts := func(off int64) int64 { return 1000 + off }
	// The bytes of segment 0 up to offset 5 (txnLog writes the same
	// entries), then 10 bytes into the marker.
	n := len(readtest.Entry(t, 0, 2, none, ts)) + len(readtest.Entry(t, 2, 3, 7, ts)) + len(readtest.Entry(t, 5, 1, none, ts)) + 10
	e := newEnv(t, DefaultConfig())
	readtest.TxnLog(t, e.Rig)
	e = stalled(t, e, int64(n))
	ctx := context.Background()
	req := &tierdpb.FetchRequest{Topic: "t", Offset: 0, MaxBytes: 1 << 20, IsolationLevel: tierdpb.IsolationLevel_READ_COMMITTED}
	b, err := e.client.Partition("t", 0).Fetch(ctx, 0, 1<<20, tierdpb.IsolationLevel_READ_COMMITTED)
	if err != nil {
		t.Fatalf("client Fetch: %v", err)
	}
	defer b.Release()
	if bs := readtest.Batches(t, b.Records); len(bs) != 3 || b.NextOffset != 6 {
		t.Fatalf("client Fetch: %d batches, next %d; want 3, 6", len(bs), b.NextOffset)
	}
	if a := b.AbortedTransactions; len(a) != 1 || a[0].ProducerId != 7 || a[0].FirstOffset != 2 {
		t.Fatalf("client Fetch: aborted transactions %v, want pid 7 from offset 2", a)
	}
	st, err := e.api.FetchStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var aborted int
	for {
		p, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("FetchStream: %v after %d aborted transactions listed", err, aborted)
		}
		aborted += len(p.AbortedTransactions)
	}
	if aborted != 1 {
		t.Fatalf("FetchStream: %d aborted transactions listed, want 1", aborted)
	}
}

// failTxnBucket fails every read of a transaction index.
type failTxnBucket struct{ rsm.Bucket }

func (b failTxnBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if strings.HasSuffix(key, kafkalog.TxnIndexSuffix) {
		return nil, errors.New("503 SlowDown")
	}
	return b.Bucket.GetRange(ctx, key, off, length)
}

// READ_COMMITTED whose aborted transactions cannot be read (the
// transaction index GET fails) after FetchStream sent the records: the
// client answers with the error, not with records and no aborted
// transactions (which would pass pid 7's aborted records 2-4 as
// committed). READ_UNCOMMITTED reads them as usual.
func TestReadCommittedNoRecordsWithoutAborted(t *testing.T) {
	fsb, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, failTxnBucket{fsb}, DefaultConfig())
	readtest.TxnLog(t, e.Rig)
	ctx := context.Background()
	pr := e.client.Partition("t", 0)
	if b, err := pr.Fetch(ctx, 0, 1<<20, tierdpb.IsolationLevel_READ_COMMITTED); err == nil {
		t.Fatalf("READ_COMMITTED with the transaction index unreadable: %d bytes to %d, aborted %v; want an error",
			len(b.Records), b.NextOffset, b.AbortedTransactions)
	}
	b, err := pr.Fetch(ctx, 0, 1<<20, tierdpb.IsolationLevel_READ_UNCOMMITTED)
	if err != nil || b.NextOffset != 10 {
		t.Fatalf("READ_UNCOMMITTED: %v", err)
	}
	b.Release()
}
