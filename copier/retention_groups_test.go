package copier

import (
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// retention.bytes over more copies than one delete group: the pass
// deletes exactly the copies the one-at-a-time rule deletes (oldest
// first while the log less the copy stays at least retention.bytes), the
// log start offset ends right after the last one deleted, and every copy
// past it stays finished.
func TestRetentionBytesAcrossGroups(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.LocalRetentionMs = ptr(0)
	cfg.Retention.RetentionMs = ptr(-1)
	cfg.Retention.RetentionBytes = ptr(-1)
	r := newRig(t, cfg, nil)
	const n = 300
	ts := r.now.UnixMilli() - 3_600_000
	for i := int64(0); i < n; i++ {
		writeSegment(t, r.dir(), i, []int64{i}, []int64{ts}, 10+int(i%7)*30)
	}
	writeSegment(t, r.dir(), n, nil, nil, 0)
	r.sync()
	r.sync()
	if lb := r.localBases(); len(lb) != 1 {
		t.Fatalf("local segments %v, want the active one", lb)
	}
	fin, err := r.store.FinishedSegments(r.tp)
	if err != nil || len(fin) != n {
		t.Fatalf("%d finished, %v", len(fin), err)
	}
	var total int64
	for _, f := range fin {
		total += f.SizeInBytes
	}
	// Keep about 20 copies' worth.
	var keepBytes int64
	for _, f := range fin[n-20:] {
		keepBytes += f.SizeInBytes
	}
	keepBytes += 5
	// The one-at-a-time rule.
	want, left := 0, total
	for _, f := range fin {
		if left-f.SizeInBytes < keepBytes {
			break
		}
		left -= f.SizeInBytes
		want++
	}
	if want <= deleteBatch {
		t.Fatalf("the case deletes %d copies, not more than one group", want)
	}
	r.c.cfg.Retention.RetentionBytes = ptr(keepBytes)
	r.sync()
	rows, err := r.store.Segments(r.tp)
	if err != nil {
		t.Fatal(err)
	}
	lso := r.offsets().LogStartOffset
	if lso != int64(want) {
		t.Errorf("log start offset %d, want %d", lso, want)
	}
	for _, row := range rows {
		deleted := row.State == remotelog.DeleteSegmentFinished
		if deleted != (row.EndOffset < int64(want)) {
			t.Errorf("copy %d-%d: %s (want deleted: %v)", row.StartOffset, row.EndOffset, row.State, row.EndOffset < int64(want))
		}
		if !deleted && row.EndOffset < lso {
			t.Errorf("copy %d-%d below the log start offset %d is %s", row.StartOffset, row.EndOffset, lso, row.State)
		}
	}
}
