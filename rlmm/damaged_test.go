package rlmm

import (
	"errors"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// ClearDamaged removes the mark from the row and the finished index, and
// survives a reopen; a row not finished is refused.
func TestClearDamaged(t *testing.T) {
	forEachFS(t, func(t *testing.T, open func() *Store) {
		s := open()
		a, b := seg(0, 205), seg(206, 411)
		for _, m := range []remotelog.SegmentMetadata{a, b} {
			if err := s.AddSegment(m); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.UpdateState(tp, 0, a.ID, remotelog.CopySegmentFinished); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClearDamaged(tp, 206, b.ID); !errors.Is(err, remotelog.ErrIllegalTransition) {
			t.Fatalf("clear a started row: %v", err)
		}
		if _, err := s.MarkDamaged(tp, 0, a.ID, "missing from the bucket: .log"); err != nil {
			t.Fatal(err)
		}
		was, err := s.ClearDamaged(tp, 0, a.ID)
		if err != nil || was.Damaged != "missing from the bucket: .log" {
			t.Fatalf("ClearDamaged = %+v, %v", was, err)
		}
		if got, _ := s.Segment(tp, 0, a.ID); got.Damaged != "" {
			t.Fatalf("row still damaged: %q", got.Damaged)
		}
		if fin, _ := s.FinishedSegments(tp); len(fin) != 1 || fin[0].Damaged != "" {
			t.Fatalf("finished index still damaged: %+v", fin)
		}
		s.Close()
		s = open()
		defer s.Close()
		if got, _ := s.Segment(tp, 0, a.ID); got.Damaged != "" || got.State != remotelog.CopySegmentFinished {
			t.Fatalf("after a reopen: %+v", got)
		}
	})
}
