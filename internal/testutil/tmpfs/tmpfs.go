//go:build linux

// Package tmpfs mounts small tmpfs filesystems for tests that need a real
// full or read-only disk. Mounting needs CAP_SYS_ADMIN (root in most
// containers); where it is not permitted the test is skipped, and tests
// inject the same errors through a filesystem wrapper instead.
package tmpfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (mount's syntax: "1m", "512k") on a new
// directory under t.TempDir(), unmounted when the test ends, and returns
// the directory. It skips the test when mounting is not permitted.
func Mount(t testing.TB, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); the injected-error tests cover this case", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// ReadOnly remounts the tmpfs at dir read-only (ro true) or read-write.
// It fails while a file on it is open for writing (EBUSY).
func ReadOnly(t testing.TB, dir string, ro bool) {
	t.Helper()
	flags := uintptr(syscall.MS_REMOUNT)
	if ro {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, ""); err != nil {
		t.Fatalf("remount %s (read-only %v): %v", dir, ro, err)
	}
}

// Fill writes a file under dir until the filesystem is full and returns
// its path; removing it gives the space back.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			return p
		}
	}
}
