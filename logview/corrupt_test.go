package logview

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/listener"
)

// TestViewCorruptLocalSegmentTiered: a local segment whose bytes went bad
// after its finished copy was made is read from the copy: the reader gets
// the records as written, not a data-loss error while intact data exists.
func TestViewCorruptLocalSegmentTiered(t *testing.T) {
	r := newRig(t)
	dir := filepath.Join(r.logDir, "t-0")
	w, _, _ := writeTxnLog(t, dir)
	r.tier(1 << 40) // copies every rolled segment, deletes nothing locally
	seg := filepath.Join(dir, "00000000000000000000.log")
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, 300_000); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tp := listener.TopicPartition{Topic: "t", Partition: 0}
	if got, _ := readAll(t, r.view, tp, 0, listener.ReadUncommitted); !bytes.Equal(got, w.from(0)) {
		t.Fatalf("read %d bytes, want %d", len(got), len(w.from(0)))
	}
}
