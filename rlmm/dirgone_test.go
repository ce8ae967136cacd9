package rlmm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestDirRemovedWhileRunning: the metadata dir is removed while the store
// runs (rm -rf, say, to free space). Pebble would go on writing its WAL,
// unlinked, acknowledging writes a restart loses, and its next WAL
// rotation, failing to create a file, used to panic the process (Go's
// "fatal error: sync: unlock of unlocked mutex"). Instead the next write
// fails, the store stays unavailable, saying the dir was removed and to
// restart (a new metadata dir is then started anew, and
// initial_retention_delay applies to it), and it never recreates the dir
// and reopens it empty behind the process's back; reads go on.
func TestDirRemovedWhileRunning(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	var log logBuf
	s, err := Open(Config{Dir: dir}, WithLogger(log.logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.retryMin = time.Millisecond
	a := seg(0, 9)
	if err := s.AddSegment(a); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// Enough writes to fill a memtable and rotate the WAL.
	var werr error
	for i := int64(1); i < 5000 && werr == nil; i++ {
		werr = s.AddSegment(seg(i*10, i*10+9))
		if werr == nil && i == 1 {
			t.Errorf("a write after the metadata dir was removed was acknowledged: a restart would lose it")
		}
	}
	if !errors.Is(werr, ErrUnavailable) || !strings.Contains(werr.Error(), "removed") {
		t.Fatalf("writes after the metadata dir was removed: %v, want ErrUnavailable saying it was removed", werr)
	}
	time.Sleep(50 * time.Millisecond) // retries, with retryMin 1ms, would have reopened it by now
	if h := s.Health(); !errors.Is(h, ErrUnavailable) || !strings.Contains(h.Error(), "restart") {
		t.Fatalf("Health() = %v, want unavailable, saying to restart", h)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the store made the removed metadata dir again (%v): it would run on an empty store", err)
	}
	if rows, err := s.Segments(tp); err != nil || len(rows) < 1 || rows[0].ID != a.ID {
		t.Fatalf("reads after the metadata dir was removed: %v %v", rows, err)
	}
}

// TestDirRemovedWhileDown: a store whose dir stopped taking writes (full)
// and was removed meanwhile does not reopen it empty once the disk has
// room again: it stays unavailable, saying to restart.
func TestDirRemovedWhileDown(t *testing.T) {
	fs := newFaultFS(vfs.Default)
	dir := filepath.Join(t.TempDir(), "db")
	s, err := Open(Config{Dir: dir}, WithFS(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.retryMin = time.Millisecond
	if err := s.AddSegment(seg(0, 9)); err != nil {
		t.Fatal(err)
	}
	fs.free.Store(0)
	if err := s.AddSegment(seg(10, 19)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write to a full dir: %v", err)
	}
	os.RemoveAll(dir)
	fs.free.Store(-1)
	time.Sleep(50 * time.Millisecond)
	if h := s.Health(); !errors.Is(h, ErrUnavailable) || !strings.Contains(h.Error(), "removed") {
		t.Fatalf("Health() = %v, want unavailable: the dir was removed", h)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the store made the removed metadata dir again (%v)", err)
	}
}
