package rlmm

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExists: a missing or empty dir holds no store, and looking writes
// nothing there; a store's dir does.
func TestExists(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Join(dir, "missing"), dir} {
		if ok, err := Exists(d); ok || err != nil {
			t.Errorf("%s: exists %v %v", d, ok, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("looking wrote %v", ents)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("looking made the missing dir: %v", err)
	}
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, err := Exists(dir); !ok || err != nil {
		t.Errorf("a store's dir: exists %v %v", ok, err)
	}
}
