package rsm_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
)

// TestDownloadCopy reads a copy back whole with its transaction index and
// producer snapshot, and the manifest's compactionOf; then refuses a
// copy whose .log differs from its manifest, whose manifest describes
// another row, or whose object is missing, leaving no file behind.
func TestDownloadCopy(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "bucket")
	b, err := filesystem.New(filesystem.Config{Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rsm.NewManager(b, rsm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	data := bytes.Repeat([]byte("record batches "), 50)
	files := rsm.SegmentFiles{Log: filepath.Join(src, "0.log"), OffsetIndex: filepath.Join(src, "0.index"), TimeIndex: filepath.Join(src, "0.timeindex"),
		TxnIndex: filepath.Join(src, "0.txnindex"), ProducerSnapshot: filepath.Join(src, "0.snapshot")}
	for p, d := range map[string][]byte{files.Log: data, files.OffsetIndex: nil, files.TimeIndex: nil, files.TxnIndex: []byte("txn"), files.ProducerSnapshot: {}} {
		if err := os.WriteFile(p, d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	merged := []remotelog.SegmentID{remotelog.NewSegmentID(), remotelog.NewSegmentID()}
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t", Partition: 2}, ID: remotelog.NewSegmentID(),
		StartOffset: 100, EndOffset: 199, SizeInBytes: int64(len(data)), State: remotelog.CopySegmentStarted, CompactionOf: merged,
		TxnIndexPresent: true, ProducerSnapshotPresent: true}
	if _, err := m.CopySegment(ctx, meta, files); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, err := m.DownloadCopy(ctx, meta, dir)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(d.Log)
	if !bytes.Equal(got, data) || string(d.TxnIndex) != "txn" || d.ProducerSnapshot == nil || len(d.ProducerSnapshot) != 0 {
		t.Fatalf("downloaded %d bytes, txnindex %q, snapshot %v", len(got), d.TxnIndex, d.ProducerSnapshot)
	}
	if !slices.Equal(d.Manifest.CompactionOf, merged) || !slices.Equal(d.Manifest.Metadata().CompactionOf, merged) {
		t.Fatalf("manifest compactionOf %v, want %v", d.Manifest.CompactionOf, merged)
	}
	if _, err := m.DownloadCopy(ctx, meta, dir); err == nil {
		t.Fatal("a second download over the first file succeeded")
	}
	os.Remove(d.Log)

	// The manifest describes another row.
	other := meta
	other.EndOffset = 150
	if _, err := m.DownloadCopy(ctx, other, dir); !errors.Is(err, rsm.ErrChecksum) {
		t.Fatalf("row of other offsets: %v, want ErrChecksum", err)
	}
	// The .log changed behind tierd's back.
	logFile := filepath.Join(root, filepath.FromSlash(m.Key(meta, kafkalog.LogSuffix)))
	bad := append([]byte(nil), data...)
	bad[7] ^= 1
	if err := os.WriteFile(logFile, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DownloadCopy(ctx, meta, dir); !errors.Is(err, rsm.ErrChecksum) {
		t.Fatalf("changed .log: %v, want ErrChecksum", err)
	}
	// An object is missing.
	if err := os.WriteFile(logFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, m.Key(meta, kafkalog.TxnIndexSuffix)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DownloadCopy(ctx, meta, dir); !errors.Is(err, rsm.ErrNotFound) {
		t.Fatalf("missing .txnindex: %v, want ErrNotFound", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("files left by failed downloads: %v", left)
	}
}
