package copier

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
)

// TestMarkDeletedOnlyTheListedFile: local retention renames a segment's
// .log to .deleted only while it is the file that was listed. A log
// cleaner that swapped a rewritten segment in under the same name since
// (here: segments 0 and 10 merged into a new 0) gets its file back at
// once, untouched, with its indexes, and errCleanerBusy; an unchanged
// segment is renamed with its indexes.
func TestMarkDeletedOnlyTheListedFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, base := range []int64{0, 10, 20} {
		for _, suffix := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
			writeFile(t, filepath.Join(dir, kafkalog.FileName(base, suffix)), "segment "+suffix)
		}
	}
	segs, err := listSegments(dir)
	if err != nil || len(segs) != 3 {
		t.Fatalf("listed %v, %v", segs, err)
	}
	// The cleaner merges 0 and 10 into a new 0 (written aside, renamed
	// into place), after the listing.
	merged := "merged segment holding offsets 0-19"
	writeFile(t, filepath.Join(dir, "merged.tmp"), merged)
	if err := os.Rename(filepath.Join(dir, "merged.tmp"), segs[0].path); err != nil {
		t.Fatal(err)
	}
	if err := markDeleted(segs[0], 10); !errors.Is(err, errCleanerBusy) {
		t.Fatalf("markDeleted of a replaced segment: %v, want errCleanerBusy", err)
	}
	if data, err := os.ReadFile(segs[0].path); err != nil || string(data) != merged {
		t.Fatalf("the cleaner's segment: %q, %v; want it in place, unchanged", data, err)
	}
	for _, suffix := range []string{kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
		if _, err := os.Stat(segs[0].file(suffix)); err != nil {
			t.Fatalf("index %s touched: %v", suffix, err)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if filepath.Ext(e.Name()) == kafkalog.DeletedSuffix {
			t.Fatalf("%s renamed", e.Name())
		}
	}
	// Segment 10, unchanged since the listing, goes with its indexes.
	if err := markDeleted(segs[1], 20); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
		if _, err := os.Stat(segs[1].file(suffix) + kafkalog.DeletedSuffix); err != nil {
			t.Fatalf("segment 10 %s not renamed: %v", suffix, err)
		}
	}
	// A segment already gone (the broker removed it) leaves the others.
	if err := os.Remove(segs[2].path); err != nil {
		t.Fatal(err)
	}
	if err := markDeleted(segs[2], 30); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segs[2].file(kafkalog.IndexSuffix)); err != nil {
		t.Fatalf("the index of a segment whose .log was already gone was renamed: %v", err)
	}
}
