package instance

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The instance id is created once and read back; a damaged file is an
// error, not a new identity.
func TestLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	id, src, err := Load(dir, "")
	if err != nil || src != "new" || len(id) != 22 {
		t.Fatalf("first Load: %q %q %v", id, src, err)
	}
	again, src, err := Load(dir, "other")
	if err != nil || again != id || src != "metadata dir" {
		t.Fatalf("second Load: %q %q %v, want %q", again, src, err, id)
	}
	other, _, _ := Load(t.TempDir(), "")
	if other == id {
		t.Fatal("two instances got one id")
	}
	os.WriteFile(filepath.Join(dir, IDFile), []byte("no spaces allowed\n"), 0o644)
	if _, _, err := Load(dir, ""); !errors.Is(err, ErrBadID) {
		t.Fatalf("damaged id file: %v", err)
	}
}

// Two locks on one log dir conflict, in one process too, and the error
// names the dir and the holder; the id recorded in the lock files is
// found again when the metadata dir is lost.
func TestLockDirs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	l, err := LockDirs([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Record("first-instance"); err != nil {
		t.Fatal(err)
	}
	_, err = LockDirs([]string{b})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	for _, want := range []string{b, "first-instance", "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := LockDirs([]string{t.TempDir(), a}); !errors.Is(err, ErrLocked) {
		t.Fatalf("lock of a free dir and a held one: %v", err)
	}
	if got := Recorded([]string{a, b, t.TempDir()}); got != "first-instance" {
		t.Errorf("Recorded = %q", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := LockDirs([]string{a, b})
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	defer l2.Close()
	id, src, err := Load(filepath.Join(t.TempDir(), "lost-meta"), Recorded([]string{a, b}))
	if err != nil || id != "first-instance" || src != "log dirs" {
		t.Fatalf("Load with the metadata dir lost: %q %q %v", id, src, err)
	}
	os.WriteFile(filepath.Join(b, LockFile), []byte(`{"instanceId":"someone-else","pid":1}`), 0o644)
	if got := Recorded([]string{a, b}); got != "" {
		t.Errorf("Recorded with two different ids = %q", got)
	}
}

// Check holds while the log dir is the one locked, and fails when it is
// renamed away, replaced by an empty directory (a disk unmounted under
// its mount point) or not locked at all; it holds again once the dir is
// back.
func TestLockCheck(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	os.Mkdir(dir, 0o755)
	l, err := LockDirs([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Check(dir); err != nil {
		t.Fatalf("locked dir: %v", err)
	}
	os.Rename(dir, dir+".away")
	if err := l.Check(dir); err == nil {
		t.Fatal("renamed away: no error")
	}
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, LockFile), nil, 0o644) // another file of the same name
	if err := l.Check(dir); err == nil || !strings.Contains(err.Error(), "not the file this tierd locked") {
		t.Fatalf("replaced: %v", err)
	}
	os.RemoveAll(dir)
	os.Rename(dir+".away", dir)
	if err := l.Check(dir); err != nil {
		t.Fatalf("back: %v", err)
	}
	if err := l.Check(t.TempDir()); err == nil {
		t.Fatal("a dir not locked: no error")
	}
}
