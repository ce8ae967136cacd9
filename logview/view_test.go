package logview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/seglog"
)

// rig is one log dir tiered by a real copier into a filesystem bucket,
// with real Pebble metadata and the in-process read engine, joined by a
// View.
type rig struct {
	t      *testing.T
	logDir string
	store  *rlmm.Store
	mgr    *rsm.Manager
	srv    *remoteread.Engine
	view   *View
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, logDir: t.TempDir()}
	b, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.store, err = rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.store.Close() })
	if r.mgr, err = rsm.NewManager(b, rsm.Config{}); err != nil {
		t.Fatal(err)
	}
	if r.srv, err = remoteread.New(remoteread.DefaultConfig(), r.store, r.mgr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.srv.Close)
	cfg := DefaultConfig()
	cfg.LogDirs, cfg.RescanInterval = []string{r.logDir}, 1 // list the dirs on every miss
	if r.view, err = New(cfg, r.srv); err != nil {
		t.Fatal(err)
	}
	return r
}

// tier runs copier passes with local.retention.bytes = localBytes until
// nothing changes.
func (r *rig) tier(localBytes int64) { r.tierRetaining(localBytes, -1) }

// tierRetaining is tier with log.retention.bytes = bytes (-1: no limit).
func (r *rig) tierRetaining(localBytes, bytes int64) {
	r.t.Helper()
	cfg := copier.DefaultConfig()
	cfg.LogDirs, cfg.FileDeleteDelayMs, cfg.BrokerID, cfg.InstanceID = []string{r.logDir}, 0, 1, "logview-test"
	never := int64(-1)
	cfg.Retention.RetentionMs, cfg.Retention.LocalRetentionBytes, cfg.Retention.RetentionBytes = &never, &localBytes, &bytes
	c, err := copier.New(cfg, r.store, r.mgr)
	if err != nil {
		r.t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.Sync(context.Background()); err != nil {
			r.t.Fatal(err)
		}
	}
}

// written is what a test wrote: every batch's bytes in offset order.
type written struct {
	batches [][]byte
	firsts  []int64 // base offset of each batch
}

func (w *written) from(offset int64) []byte {
	i := sort.Search(len(w.firsts), func(i int) bool { return i+1 >= len(w.firsts) || w.firsts[i+1] > offset })
	return bytes.Join(w.batches[i:], nil)
}

// capture reads the whole log through seglog before tiering touches it.
func capture(t *testing.T, l *seglog.Log) *written {
	t.Helper()
	w := &written{}
	for off := int64(0); off < l.HighWatermark(); {
		data, err := l.Read(off, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for p := 0; p < len(data); {
			b, err := batch.ParseHeader(data[p:], int64(p))
			if err != nil {
				t.Fatal(err)
			}
			w.batches = append(w.batches, append([]byte(nil), data[p:p+int(b.Size)]...))
			w.firsts = append(w.firsts, b.BaseOffset)
			off = b.LastOffset + 1
			p += int(b.Size)
		}
	}
	return w
}

// maxTimestamp is the first record with the largest timestamp.
func (w *written) maxTimestamp(t *testing.T) listener.TimestampOffset {
	best := listener.TimestampOffset{Offset: -1, Timestamp: -1}
	for _, b := range w.batches {
		recs, err := batch.Records(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Timestamp > best.Timestamp {
				best = listener.TimestampOffset{Offset: r.Offset, Timestamp: r.Timestamp}
			}
		}
	}
	return best
}

func val(off int64) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%08d", off)), 2500) } // 20 KB

// writeTxnLog writes 400 records in about 8 one-MiB segments with leader
// epochs 0 and 3, producer 7's transaction aborted across segments 1-3
// and producer 8's committed one, and returns the aborted transaction's
// first offset and marker offset.
func writeTxnLog(t *testing.T, dir string) (*written, int64, int64) {
	t.Helper()
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var first, marker int64 = -1, -1
	for i := int64(0); i < 400; i++ {
		rec := seglog.Record{Key: []byte(fmt.Sprint(i)), Value: val(i), Timestamp: 1_000_000 + i*10}
		var err error
		switch {
		case i >= 60 && i < 160 && i%2 == 0:
			var off int64
			off, err = l.AppendTransactional(7, 0, rec)
			if first < 0 {
				first = off
			}
		case i >= 100 && i < 120:
			_, err = l.AppendTransactional(8, 0, rec)
		default:
			_, err = l.Append(rec)
		}
		if err != nil {
			t.Fatal(err)
		}
		if i == 160 {
			if marker, err = l.EndTransaction(7, 0, false); err != nil {
				t.Fatal(err)
			}
		}
		if i == 130 {
			if _, err := l.EndTransaction(8, 0, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	w := capture(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return w, first, marker
}

// readAll reads the partition from offset to the high watermark.
func readAll(t *testing.T, v *View, tp listener.TopicPartition, from int64, iso listener.Isolation) ([]byte, []listener.AbortedTxn) {
	t.Helper()
	var out []byte
	var aborted []listener.AbortedTxn
	for off := from; ; {
		res, err := v.Read(context.Background(), tp, off, 256<<10, iso)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		if len(res.Records) == 0 {
			return out, aborted
		}
		out = append(out, res.Records...)
		aborted = append(aborted, res.Aborted...)
		last, err := lastOffset(res.Records)
		if err != nil {
			t.Fatal(err)
		}
		off = last + 1
	}
}

// TestViewAcrossTiers: with most segments tiered and deleted locally,
// every offset reads byte for byte as written, from any start; offsets,
// aborted transactions, timestamps and leader epochs join both tiers.
func TestViewAcrossTiers(t *testing.T) {
	r := newRig(t)
	w, first, marker := writeTxnLog(t, filepath.Join(r.logDir, "t-0"))
	r.tier(2 << 20)
	tp := listener.TopicPartition{Topic: "t", Partition: 0}
	ctx := context.Background()
	o, err := r.view.Offsets(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	if o.LogStartOffset != 0 || o.HighWatermark != 402 || o.LastStableOffset != 402 || o.HighestTieredOffset < 300 ||
		o.LocalLogStartOffset <= 0 || o.LocalLogStartOffset > o.HighestTieredOffset+1 {
		t.Fatalf("offsets %+v", o)
	}
	for _, from := range []int64{0, 1, 77, first, marker, o.LocalLogStartOffset - 1, o.LocalLogStartOffset, 401} {
		got, _ := readAll(t, r.view, tp, from, listener.ReadUncommitted)
		if want := w.from(from); !bytes.Equal(got, want) {
			t.Fatalf("from %d: %d bytes, want %d", from, len(got), len(want))
		}
	}
	_, aborted := readAll(t, r.view, tp, 0, listener.ReadCommitted)
	if len(aborted) == 0 || aborted[0] != (listener.AbortedTxn{ProducerID: 7, FirstOffset: first}) {
		t.Fatalf("aborted %+v, want producer 7 from %d", aborted, first)
	}
	if _, aborted := readAll(t, r.view, tp, marker+1, listener.ReadCommitted); len(aborted) != 0 {
		t.Fatalf("aborted after the marker: %+v", aborted)
	}
	if _, err := r.view.Read(ctx, tp, 403, 1, listener.ReadUncommitted); !errors.As(err, new(*listener.OffsetOutOfRangeError)) {
		t.Fatalf("read past the end: %v", err)
	}
	ts, found, err := r.view.MaxTimestamp(ctx, tp, listener.ReadUncommitted)
	if want := w.maxTimestamp(t); err != nil || !found || ts != want {
		t.Fatalf("max timestamp %+v %v %v, want %+v (the markers are stamped when written, as Kafka's)", ts, found, err, want)
	}
	for _, q := range []int64{0, 1_000_005, 1_000_000 + 50*10, 1_000_000 + 390*10} {
		got, found, err := r.view.OffsetForTimestamp(ctx, tp, q, listener.ReadUncommitted)
		if err != nil || !found || got.Timestamp < q {
			t.Fatalf("offset for %d: %+v %v %v", q, got, found, err)
		}
	}
	if _, found, _ := r.view.OffsetForTimestamp(ctx, tp, w.maxTimestamp(t).Timestamp+1, listener.ReadUncommitted); found {
		t.Fatal("a timestamp after every record was found")
	}
	topics, err := r.view.Topics(ctx)
	if err != nil || len(topics) != 1 || topics[0].Name != "t" || len(topics[0].Partitions) != 1 || topics[0].ID == ([16]byte{}) {
		t.Fatalf("topics %+v %v", topics, err)
	}
}

// TestViewSegmentDeletedUnderReader: a local segment deleted after the
// view listed the dir reads from its copy.
func TestViewSegmentDeletedUnderReader(t *testing.T) {
	r := newRig(t)
	w, _, _ := writeTxnLog(t, filepath.Join(r.logDir, "t-0"))
	r.tier(1 << 40) // copies everything, deletes nothing locally
	tp := listener.TopicPartition{Topic: "t", Partition: 0}
	if _, err := r.view.Offsets(context.Background(), tp); err != nil { // lists the dir
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(r.logDir, "t-0", "00000000000000000000.log")); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, r.view, tp, 0, listener.ReadUncommitted)
	if !bytes.Equal(got, w.from(0)) {
		t.Fatalf("%d bytes, want %d", len(got), len(w.from(0)))
	}
}
