package instance

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRunning finds the process holding the lock files, and no process
// once the lock is released, nor a live process that does not hold the
// file (a pid reused).
func TestRunning(t *testing.T) {
	dir := t.TempDir()
	if _, err := Running([]string{dir}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no lock file: %v", err)
	}
	l, err := LockDirs([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Record("me"); err != nil {
		t.Fatal(err)
	}
	h, err := Running([]string{dir})
	if err != nil || h.PID != os.Getpid() || h.InstanceID != "me" {
		t.Fatalf("Running = %+v, %v; want this process", h, err)
	}
	l.Close()
	if _, err := Running([]string{dir}); !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), "does not hold it") {
		t.Fatalf("after Close: %v", err)
	}
	// A record naming a live process that never opened the file.
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	defer cmd.Process.Kill()
	host, _ := os.Hostname()
	rec := `{"instanceId":"x","pid":` + strconv.Itoa(cmd.Process.Pid) + `,"host":"` + host + `"}`
	os.WriteFile(filepath.Join(dir, LockFile), []byte(rec+"\n"), 0o644)
	if _, err := Running([]string{dir}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("a process not holding the file: %v", err)
	}
}
