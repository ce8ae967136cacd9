package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/proto/tierdpb"
)

// A rolled segment left by a broker with log.preallocate=true (780 bytes
// of batches, then 4096 zero bytes) is tiered as its 780 bytes, its local
// files go by local retention, and the fetch server returns every offset's
// batch byte for byte and nothing of the zeros.
func TestCasePreallocatedLogTail(t *testing.T) {
	t.Parallel()
	w := newLocal(t)
	os.MkdirAll(w.dir, 0o755)
	var log []byte
	for off := int64(0); off < 10; off++ {
		log, _ = batch.AppendBatch(log, batch.NewParams(off, 0), []batch.Record{{Timestamp: 7000 + off, Value: []byte("0123456789")}}, nil)
	}
	if len(log) != 780 {
		t.Fatalf("%d bytes of batches", len(log))
	}
	os.WriteFile(filepath.Join(w.dir, kafkalog.FileName(0, ".log")), append(bytes.Clone(log), make([]byte, 4096)...), 0o644)
	os.WriteFile(filepath.Join(w.dir, kafkalog.FileName(0, ".index")), make([]byte, 8*64), 0o644) // preallocated too
	os.WriteFile(filepath.Join(w.dir, kafkalog.FileName(10, ".log")), nil, 0o644)
	c := w.copier(func(cfg *copier.Config) { cfg.Retention.LocalRetentionMs = ptr(0) })
	if n, err := c.Sync(context.Background()); n != 1 || err != nil {
		t.Fatalf("copied %d: %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(w.dir, kafkalog.FileName(0, ".log"))); !os.IsNotExist(err) {
		t.Fatalf("local segment still there: %v", err)
	}
	fin, _ := w.store.FinishedSegments(w.tp)
	if len(fin) != 1 || fin[0].SizeInBytes != 780 {
		t.Fatalf("rows %+v", fin)
	}
	for off := int64(0); off < 10; off++ {
		r, err := w.api.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: "t", Offset: off, MaxBytes: 1})
		if err != nil {
			t.Fatalf("fetch %d: %v", off, err)
		}
		if !bytes.Equal(r.Records, log[off*78:(off+1)*78]) {
			t.Fatalf("fetch %d: %d bytes differ from the batch written", off, len(r.Records))
		}
	}
	r, err := w.api.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: "t", Offset: 0, MaxBytes: 1 << 20})
	if err != nil || !bytes.Equal(r.Records, log) {
		t.Fatalf("fetch of the whole copy: %d bytes, %v; want the 780 of the batches", len(r.GetRecords()), err)
	}
}
