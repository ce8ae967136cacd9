package logview

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/seglog"
)

func writeTopicID(t *testing.T, dir string, id [16]byte) {
	t.Helper()
	md := "version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "partition.metadata"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestViewRecreatedTopic: a topic deleted and created again under the same
// name (a new topic id in partition.metadata) while the old incarnation's
// copies are still in the remote tier (their deletion waits for the
// cluster or an operator) is served from the new local log only: the old
// copies' offsets, log start offset and records never mix into it.
func TestViewRecreatedTopic(t *testing.T) {
	r := newRig(t)
	dir := filepath.Join(r.logDir, "t-0")
	old := [16]byte{0x11, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTopicID(t, dir, old)
	writeTxnLog(t, dir)
	r.tier(2 << 20)
	tp := listener.TopicPartition{Topic: "t", Partition: 0}
	ctx := context.Background()
	if o, err := r.view.Offsets(ctx, tp); err != nil || o.HighestTieredOffset < 300 {
		t.Fatalf("old incarnation: %+v %v", o, err)
	}

	// The topic is deleted and created again (a new directory, a new id),
	// and the new log's first segment is deleted by the broker's
	// retention: its log starts at the second segment's base offset.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 80; i++ {
		if _, err := l.Append(seglog.Record{Value: val(1000 + i), Timestamp: 5}); err != nil {
			t.Fatal(err)
		}
	}
	w := capture(t, l)
	segs := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) < 2 {
		t.Fatalf("%d segments", len(segs))
	}
	start := segs[1].BaseOffset
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("%020d%s", 0, ext))); err != nil {
			t.Fatal(err)
		}
	}
	writeTopicID(t, dir, [16]byte{0x22, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2})
	// A view listing the dirs afresh (the rig's caches its topic ids for
	// CacheTTL).
	vcfg := DefaultConfig()
	vcfg.LogDirs = []string{r.logDir}
	v, err := New(vcfg, r.srv)
	if err != nil {
		t.Fatal(err)
	}
	o, err := v.Offsets(ctx, tp)
	if err != nil || o.LogStartOffset != start || o.HighWatermark != 80 || o.HighestTieredOffset != -1 {
		t.Fatalf("new incarnation: offsets %+v %v, want [%d, 80) with nothing tiered", o, err, start)
	}
	if res, err := v.Read(ctx, tp, 0, 1<<20, listener.ReadUncommitted); !errors.As(err, new(*listener.OffsetOutOfRangeError)) {
		t.Fatalf("offset 0 of the new incarnation: %d bytes, %v; want out of range (the old copies are not its records)", len(res.Records), err)
	}
	if got, _ := readAll(t, v, tp, start, listener.ReadUncommitted); !bytes.Equal(got, w.from(start)) {
		t.Fatalf("new incarnation: read %d bytes, want %d", len(got), len(w.from(start)))
	}
}
