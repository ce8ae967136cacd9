package rsm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// TestCopySegmentLeavesOutZeroTail: a copy whose row says the local .log
// was longer uploads only SizeInBytes bytes, with the manifest's size and
// checksum of those bytes, and the manifest keeps the local size.
func TestCopySegmentLeavesOutZeroTail(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	m, err := rsm.NewManager(b, rsm.Config{Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := append(bytes.Repeat([]byte("batches!"), 100), make([]byte, 4096)...) // 800 bytes, then zeros
	files := rsm.SegmentFiles{Log: filepath.Join(dir, "00000000000000000000.log"),
		OffsetIndex: filepath.Join(dir, "00000000000000000000.index"), TimeIndex: filepath.Join(dir, "00000000000000000000.timeindex")}
	for p, d := range map[string][]byte{files.Log: data, files.OffsetIndex: nil, files.TimeIndex: nil} {
		if err := os.WriteFile(p, d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t", Partition: 0}, ID: remotelog.NewSegmentID(),
		StartOffset: 0, EndOffset: 9, SizeInBytes: 800, LocalSizeInBytes: int64(len(data)), State: remotelog.CopySegmentStarted}
	mf, err := m.CopySegment(ctx, meta, files)
	if err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%08x", crc32.Checksum(data[:800], crc32.MakeTable(crc32.Castagnoli)))
	if o := mf.Objects[kafkalog.LogSuffix]; o.Size != 800 || o.CRC32C != sum || o.SHA256 != "" {
		t.Fatalf("log object %+v, want 800 bytes of crc32c %s", o, sum)
	}
	rc, err := m.FetchLogSegment(ctx, meta, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data[:800]) {
		t.Fatalf("stored %d bytes, want the first 800", len(got))
	}
	if err := m.VerifyObject(ctx, mf.Objects[kafkalog.LogSuffix]); err != nil {
		t.Fatal(err)
	}
	back, err := m.ReadManifest(ctx, m.Key(meta, ".manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r := back.Metadata(); r.SizeInBytes != 800 || r.LocalSizeInBytes != int64(len(data)) {
		t.Fatalf("manifest row sizes %d/%d", r.SizeInBytes, r.LocalSizeInBytes)
	}

	// The file changed since it was checked: no copy, nothing left behind.
	meta2 := meta
	meta2.ID, meta2.LocalSizeInBytes = remotelog.NewSegmentID(), int64(len(data))+1
	if _, err := m.CopySegment(ctx, meta2, files); err == nil || !strings.Contains(err.Error(), "file changed") {
		t.Fatalf("changed file: %v", err)
	}
	var left []string
	b.Iter(ctx, "", func(k string) error {
		if strings.Contains(k, meta2.ID.String()) {
			left = append(left, k)
		}
		return nil
	})
	if len(left) != 0 {
		t.Fatalf("objects left by the refused copy: %v", left)
	}
	// A row whose copy would not be shorter than the file is refused.
	meta2.LocalSizeInBytes = 800
	if _, err := m.CopySegment(ctx, meta2, files); err == nil {
		t.Fatal("copy as long as the file accepted as a trimmed copy")
	}
}

// TestManifestWithoutLocalSize: a manifest written before localSizeInBytes
// existed reads as a copy of the whole file.
func TestManifestWithoutLocalSize(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	m, _ := rsm.NewManager(b, rsm.Config{})
	id := remotelog.NewSegmentID()
	old := map[string]any{"formatVersion": 1, "topic": "t", "partition": 0, "segmentId": id.String(), "startOffset": 0, "endOffset": 4,
		"maxTimestampMs": 5, "sizeInBytes": 300, "leaderEpochs": []any{}, "txnIndexPresent": false, "producerSnapshotPresent": false,
		"createdMs": 1, "brokerId": 0, "objects": map[string]any{".log": map[string]any{"key": "t-0/x.log", "size": 300, "sha256": strings.Repeat("0", 64)}}}
	body, _ := json.Marshal(old)
	key := m.Key(remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t"}, ID: id}, ".manifest.json")
	if err := b.Upload(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	mf, err := m.ReadManifest(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if r := mf.Metadata(); r.SizeInBytes != 300 || r.LocalSizeInBytes != 0 {
		t.Fatalf("sizes %d/%d", r.SizeInBytes, r.LocalSizeInBytes)
	}
	// And a copy of a whole file writes no localSizeInBytes.
	if out, _ := json.Marshal(mf); strings.Contains(string(out), "localSizeInBytes") {
		t.Fatalf("manifest %s", out)
	}
}
