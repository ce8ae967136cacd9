package rsm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
)

// TestManifestCompacted: a copy whose row says it was compacted writes
// "compacted": true in its manifest, and the row rebuilt from the
// manifest says so; a copy that was not compacted writes no such field,
// and a manifest written before the field existed reads as not
// compacted. Filesystem bucket.
func TestManifestCompacted(t *testing.T) {
	ctx := context.Background()
	b, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rsm.NewManager(b, rsm.Config{Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := rsm.SegmentFiles{Log: filepath.Join(dir, "00000000000000000000.log"),
		OffsetIndex: filepath.Join(dir, "00000000000000000000.index"), TimeIndex: filepath.Join(dir, "00000000000000000000.timeindex")}
	for p, d := range map[string][]byte{files.Log: bytes.Repeat([]byte("x"), 100), files.OffsetIndex: nil, files.TimeIndex: nil} {
		if err := os.WriteFile(p, d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tp := remotelog.TopicPartition{Topic: "t", Partition: 0}
	for _, compacted := range []bool{true, false} {
		meta := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: 0, EndOffset: 9, SizeInBytes: 100,
			State: remotelog.CopySegmentStarted, Compacted: compacted}
		if _, err := m.CopySegment(ctx, meta, files); err != nil {
			t.Fatal(err)
		}
		key := m.Key(meta, ".manifest.json")
		raw, _, err := b.ReadVersioned(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]any
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		if v, ok := fields["compacted"]; ok != compacted || (ok && v != true) {
			t.Errorf("compacted %t: manifest %s", compacted, raw)
		}
		mf, err := m.ReadManifest(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if mf.Compacted != compacted || mf.Metadata().Compacted != compacted {
			t.Errorf("compacted %t: read back manifest %t, row %t", compacted, mf.Compacted, mf.Metadata().Compacted)
		}
	}

	// A manifest written before the field existed: not compacted.
	id := remotelog.NewSegmentID()
	old := map[string]any{"formatVersion": 1, "topic": "t", "partition": 0, "segmentId": id.String(), "startOffset": 0, "endOffset": 4,
		"maxTimestampMs": 5, "sizeInBytes": 300, "leaderEpochs": []any{}, "txnIndexPresent": false, "producerSnapshotPresent": false,
		"createdMs": 1, "brokerId": 0, "objects": map[string]any{".log": map[string]any{"key": "t-0/x.log", "size": 300, "sha256": strings.Repeat("0", 64)}}}
	body, _ := json.Marshal(old)
	key := m.Key(remotelog.SegmentMetadata{TopicPartition: tp, ID: id}, ".manifest.json")
	if err := b.Upload(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	mf, err := m.ReadManifest(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if mf.Compacted || mf.Metadata().Compacted {
		t.Fatal("a manifest without the field reads as compacted")
	}
}
