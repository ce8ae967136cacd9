package copier

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockFileFIFO: a .lock that is a FIFO (or a symlink to one) is no
// broker's lock file; opening it for reading would wait for a writer
// forever, stopping every pass at its probe. The probe, excludeBroker and
// isTierdLock return at once: the log dir is broker-owned (whether a
// broker runs cannot be told), local retention renames nothing.
func TestLockFileFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"fifo", "symlink to a fifo"} {
		p := filepath.Join(dir, BrokerLockFile)
		os.Remove(p)
		var err error
		if how == "fifo" {
			err = os.Rename(fifo, p)
		} else {
			err = os.Symlink(fifo, p)
		}
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			st       LogDirState
			exclErr  error
			tierds   bool
			excluded *brokerExclusion
		}
		done := make(chan result, 1)
		go func() {
			var r result
			r.st = probeLogDir(dir, yes(false), nil)
			r.excluded, _, r.exclErr = excludeBroker(p)
			r.tierds = isTierdLock(p)
			done <- r
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(20 * time.Second): // a hang, not a speed: nothing here waits on anything
			// A writer lets the blocked open go on, so that the test ends.
			for {
				w, err := os.OpenFile(p, os.O_RDWR, 0)
				if err == nil {
					w.Close()
				}
				select {
				case <-done:
					t.Fatalf("%s: the probe of a log dir whose .lock is a FIFO waited for a writer", how)
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		if r.excluded != nil {
			r.excluded.release()
		}
		if !r.st.BrokerOwned || !strings.Contains(r.st.Why, "cannot be checked") {
			t.Errorf("%s: probe %+v, want broker-owned: whether a broker runs cannot be told", how, r.st)
		}
		if r.exclErr == nil || errors.Is(r.exclErr, errBrokerHolds) {
			t.Errorf("%s: excludeBroker: %v, want an I/O error", how, r.exclErr)
		}
		if r.tierds {
			t.Errorf("%s: isTierdLock true", how)
		}
		if how == "fifo" {
			os.Rename(p, fifo)
		}
	}
}

// TestExcludeBrokerMarkNotWritten: a full disk (here the file size
// limit: the marker's write fails, as with ENOSPC) is when local
// retention must run; tierd then cannot write its marker into the .lock
// it creates, and excludes the broker all the same (an empty .lock left
// by a kill counts as Kafka's, the side that deletes nothing), removing
// the file on release.
func TestExcludeBrokerMarkNotWritten(t *testing.T) {
	p := filepath.Join(t.TempDir(), BrokerLockFile)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: old.Max}); err != nil {
		t.Skip("cannot lower the file size limit:", err)
	}
	e, _, err := excludeBroker(p)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("excludeBroker with the marker's write failing: %v, want the broker excluded all the same", err)
	}
	if h, err := spawnHolder(goHolderCmd(p)); err == nil {
		h.release(t)
		t.Fatal("a broker took its lock while tierd held .lock")
	}
	if err := e.release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("the .lock tierd created is still there after release: %v", err)
	}
}

// TestExcludeBrokerLockReplaced: the .lock that excludeBroker opened is
// deleted before its lock is granted (a broker shutting down unlocks it,
// then deletes it) and a broker starting meanwhile creates and locks a
// new one. A lock on the deleted file keeps no broker out: tierd must not
// take it as the exclusion, and finds the new broker's instead.
func TestExcludeBrokerLockReplaced(t *testing.T) {
	p := filepath.Join(t.TempDir(), BrokerLockFile)
	writeFile(t, p, "")
	f, created, err := openBrokerLock(p)
	if err != nil || created {
		t.Fatalf("open an existing .lock: created %v, %v", created, err)
	}
	if err := os.Remove(p); err != nil { // the old broker's clean shutdown
		t.Fatal(err)
	}
	h := goHolder(t, p) // a new broker: its own .lock, locked
	if e, _, err := lockOpened(f, p, created); !errors.Is(err, errLockReplaced) {
		if e != nil {
			e.release()
		}
		t.Fatalf("a lock on the deleted .lock: %v, want errLockReplaced", err)
	}
	if _, pid, err := excludeBroker(p); !errors.Is(err, errBrokerHolds) || pid != h.pid {
		t.Fatalf("with a broker holding the new .lock: pid %d err %v, want errBrokerHolds from %d", pid, err, h.pid)
	}
	h.release(t)
	// Replaced by a file that no broker holds: tierd takes that one, and
	// leaves it (it did not create it).
	os.Remove(p)
	writeFile(t, p, "")
	f, created, err = openBrokerLock(p)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(p)
	writeFile(t, p, "")
	if _, _, err := lockOpened(f, p, created); !errors.Is(err, errLockReplaced) {
		t.Fatalf("a lock on a replaced .lock: %v, want errLockReplaced", err)
	}
	e, _, err := excludeBroker(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the .lock tierd found is gone after release: %v", err)
	}
}

// TestExcludeBrokerLosesTheRaceToABroker: a broker that opened and
// locked the .lock tierd had just created, before tierd's lock, keeps it:
// tierd is refused (errBrokerHolds), removes nothing, and the log dir is
// broker-owned while the broker holds it. (The file holds tierd's mark
// from its first moment, so that no kill leaves an empty, Kafka-looking
// .lock of tierd's making; a broker has meta.properties beside it.)
func TestExcludeBrokerLosesTheRaceToABroker(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, BrokerLockFile)
	f, created, err := openBrokerLock(p)
	if err != nil || !created {
		t.Fatalf("create .lock: created %v, %v", created, err)
	}
	if !isTierdLock(p) {
		t.Fatal("tierd's new .lock is not marked from its first moment")
	}
	if stale, _ := filepath.Glob(filepath.Join(dir, lockTempPrefix+"*")); len(stale) != 0 {
		t.Fatalf("the marked file's first name is left: %v", stale)
	}
	h := goHolder(t, p) // the broker opens the new file and locks it first
	if _, _, err := lockOpened(f, p, created); !errors.Is(err, errBrokerHolds) {
		t.Fatalf("with the broker holding the new .lock: %v, want errBrokerHolds", err)
	}
	if _, err := os.Lstat(p); err != nil {
		t.Fatalf("the broker's .lock was removed: %v", err)
	}
	if st := probeLogDir(dir, nil, nil); !st.Locked || !st.BrokerOwned {
		t.Fatalf("a broker holding the .lock: %+v, want broker-owned", st)
	}
	h.release(t)
}

// TestCreateMarkedLeavesNoEmptyLock: a kill after the marked file was
// written and before it was linked leaves only its first name, which the
// next creation removes; a .lock that appeared meanwhile is not replaced.
func TestCreateMarkedLeavesNoEmptyLock(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, BrokerLockFile)
	os.WriteFile(filepath.Join(dir, lockTempPrefix+"999999"), []byte(tierdLockMarker), 0o644) // a kill's leftover
	f, err := createMarked(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if stale, _ := filepath.Glob(filepath.Join(dir, lockTempPrefix+"*")); len(stale) != 0 {
		t.Fatalf("left: %v", stale)
	}
	os.Remove(p)
	os.WriteFile(p, nil, 0o644) // a broker's, created first
	if _, err := createMarked(p); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over an existing .lock: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Fatalf("the existing .lock was changed: %q", b)
	}
}
