package rsm_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// TestCopySegmentProgress: the Progress hook is told, in increasing
// amounts, the bytes of the .log read for upload, ending at the bytes the
// copy holds (the .log only: indexes are not counted).
func TestCopySegmentProgress(t *testing.T) {
	m, err := rsm.NewManager(memory.New(), rsm.Config{Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: read in several calls
	files := rsm.SegmentFiles{Log: filepath.Join(dir, "00000000000000000000.log"),
		OffsetIndex: filepath.Join(dir, "00000000000000000000.index"), TimeIndex: filepath.Join(dir, "00000000000000000000.timeindex")}
	for p, d := range map[string][]byte{files.Log: data, files.OffsetIndex: nil, files.TimeIndex: nil} {
		if err := os.WriteFile(p, d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var seen []int64
	files.Progress = func(n int64) { seen = append(seen, n) }
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t", Partition: 0}, ID: remotelog.NewSegmentID(),
		StartOffset: 0, EndOffset: 9, SizeInBytes: int64(len(data)), State: remotelog.CopySegmentStarted}
	if _, err := m.CopySegment(context.Background(), meta, files); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 || seen[len(seen)-1] != int64(len(data)) {
		t.Fatalf("progress %v: want several calls ending at %d", seen, len(data))
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("progress went from %d to %d", seen[i-1], seen[i])
		}
	}
}
