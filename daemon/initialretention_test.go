package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/instance"
)

// TestMetadataCreated: a metadata dir with no instance id is new: its
// creation is recorded once and read back; one with an instance id and
// no record predates it (no wait); a go-ahead is kept for good; a
// damaged record is an error naming the file.
func TestMetadataCreated(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := filepath.Join(t.TempDir(), "meta")
	t0 := time.UnixMilli(1_700_000_000_000)
	if got, err := MetadataCreated(dir, false, t0, log); err != nil || got != t0.UnixMilli() {
		t.Fatalf("new: %d %v", got, err)
	}
	if err := instance.Write(dir, "an-instance"); err != nil {
		t.Fatal(err)
	}
	if got, err := MetadataCreated(dir, false, t0.Add(time.Hour), log); err != nil || got != t0.UnixMilli() {
		t.Fatalf("again: %d %v", got, err)
	}
	if got, err := MetadataCreated(dir, true, t0.Add(time.Hour), log); err != nil || got != 0 {
		t.Fatalf("go ahead: %d %v", got, err)
	}
	if got, err := MetadataCreated(dir, false, t0.Add(2*time.Hour), log); err != nil || got != 0 {
		t.Fatalf("after go ahead: %d %v", got, err)
	}

	older := filepath.Join(t.TempDir(), "meta")
	if err := instance.Write(older, "an-older-instance"); err != nil {
		t.Fatal(err)
	}
	if got, err := MetadataCreated(older, false, t0, log); err != nil || got != 0 {
		t.Fatalf("older metadata dir: %d %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(older, CreatedFile)); !os.IsNotExist(err) {
		t.Fatalf("a record was made for an older metadata dir: %v", err)
	}
	os.WriteFile(filepath.Join(older, CreatedFile), []byte("{garbage"), 0o644)
	if _, err := MetadataCreated(older, false, t0, log); err == nil || !strings.Contains(err.Error(), CreatedFile) {
		t.Fatalf("damaged record: %v", err)
	}
}
