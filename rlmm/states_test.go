package rlmm

import (
	"errors"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// states returns the stored state of each row.
func states(t *testing.T, s *Store, rows ...remotelog.SegmentMetadata) []remotelog.SegmentState {
	t.Helper()
	out := make([]remotelog.SegmentState, len(rows))
	for i, r := range rows {
		m, err := s.Segment(tp, r.StartOffset, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = m.State
	}
	return out
}

// UpdateStates moves many rows in one synced write, with UpdateState's
// checks for each row (a refused row writes nothing at all) and its
// effects: the finished rows, the highest tiered offset, one new version
// and one change that holds every row.
func TestUpdateStates(t *testing.T) {
	forEachFS(t, func(t *testing.T, open func() *Store) {
		s := open()
		defer s.Close()
		a, b, c, d := seg(0, 9), seg(10, 19), seg(20, 29), seg(30, 39)
		for _, m := range []remotelog.SegmentMetadata{a, b, c, d} {
			if err := s.AddSegment(m); err != nil {
				t.Fatal(err)
			}
		}
		synced, _ := writes(t, s)
		v0 := s.PartitionVersion(tp)
		got, err := s.UpdateStates(tp, []remotelog.SegmentMetadata{c, a, b}, remotelog.CopySegmentFinished)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].ID != c.ID || got[1].ID != a.ID || got[2].State != remotelog.CopySegmentFinished || got[2].EndOffset != 19 {
			t.Fatalf("UpdateStates returned %+v, want c, a, b finished as stored", got)
		}
		if n, _ := writes(t, s); n != synced+1 {
			t.Fatalf("three rows finished in %v synced writes, want 1", n-synced)
		}
		changes, v1, ok := s.ChangesSince(tp, v0)
		if !ok || len(changes) != 1 || v1 == v0 {
			t.Fatalf("ChangesSince = %d changes, %+v -> %+v, %v; want one change and a new version", len(changes), v0, v1, ok)
		}
		ch := changes[0]
		if ch.Offsets == nil || ch.Offsets.HighestTieredOffset != 29 || len(ch.Finished) != 3 {
			t.Fatalf("change %+v, want three finished rows and the highest tiered offset 29", ch)
		}
		for i, id := range []remotelog.SegmentID{c.ID, a.ID, b.ID} {
			if op := ch.Finished[i]; op.ID != id || op.Row == nil || op.Row.State != remotelog.CopySegmentFinished {
				t.Fatalf("change row %d = %+v, want %s set finished", i, op, id)
			}
		}
		if offs, _, err := s.Offsets(tp); err != nil || offs.HighestTieredOffset != 29 {
			t.Fatalf("offsets %+v, %v; want highest tiered offset 29", offs, err)
		}

		// Refused, and nothing written, for any bad row among good ones.
		other := seg(40, 49)
		other.TopicPartition = remotelog.TopicPartition{Topic: "other", Partition: 0}
		for _, bad := range []struct {
			name string
			rows []remotelog.SegmentMetadata
			to   remotelog.SegmentState
			is   error
		}{
			{"an illegal transition", []remotelog.SegmentMetadata{d, a}, remotelog.DeleteSegmentFinished, remotelog.ErrIllegalTransition},
			{"a row not stored", []remotelog.SegmentMetadata{a, seg(50, 59)}, remotelog.DeleteSegmentStarted, ErrSegmentNotFound},
			{"a row of another partition", []remotelog.SegmentMetadata{a, other}, remotelog.DeleteSegmentStarted, nil},
			{"a row named twice", []remotelog.SegmentMetadata{a, b, a}, remotelog.DeleteSegmentStarted, nil},
		} {
			n0, _ := writes(t, s)
			if _, err := s.UpdateStates(tp, bad.rows, bad.to); err == nil || (bad.is != nil && !errors.Is(err, bad.is)) {
				t.Fatalf("%s: err %v, want one (%v)", bad.name, err, bad.is)
			}
			if n, _ := writes(t, s); n != n0 || s.PartitionVersion(tp) != v1 {
				t.Fatalf("%s: %v writes, version %+v -> %+v; want none", bad.name, n-n0, v1, s.PartitionVersion(tp))
			}
			want := []remotelog.SegmentState{remotelog.CopySegmentFinished, remotelog.CopySegmentFinished, remotelog.CopySegmentFinished, remotelog.CopySegmentStarted}
			if st := states(t, s, a, b, c, d); st[0] != want[0] || st[1] != want[1] || st[2] != want[2] || st[3] != want[3] {
				t.Fatalf("%s: states %v, want %v", bad.name, st, want)
			}
		}

		// The delete protocol's two steps, two rows each, one write each.
		n0, _ := writes(t, s)
		if _, err := s.UpdateStates(tp, []remotelog.SegmentMetadata{a, d}, remotelog.DeleteSegmentStarted); err != nil {
			t.Fatal(err)
		}
		v2 := s.PartitionVersion(tp)
		if _, err := s.UpdateStates(tp, []remotelog.SegmentMetadata{a, d}, remotelog.DeleteSegmentFinished); err != nil {
			t.Fatal(err)
		}
		if n, _ := writes(t, s); n != n0+2 {
			t.Fatalf("two batches made %v synced writes, want 2", n-n0)
		}
		if st := states(t, s, a, b, c, d); st[0] != remotelog.DeleteSegmentFinished || st[3] != remotelog.DeleteSegmentFinished || st[1] != remotelog.CopySegmentFinished {
			t.Fatalf("states %v, want a and d deleted, b and c finished", st)
		}
		changes, v3, ok := s.ChangesSince(tp, v1)
		if !ok || len(changes) != 2 || v3 == v2 || v2 == v1 {
			t.Fatalf("ChangesSince = %d changes, versions %+v, %+v, %+v, %v; want two changes and two new versions", len(changes), v1, v2, v3, ok)
		}
		for i, ch := range changes {
			if len(ch.Finished) != 2 || ch.Finished[0].ID != a.ID || ch.Finished[1].ID != d.ID || ch.Finished[0].Row != nil || ch.Finished[1].Row != nil || ch.Offsets != nil {
				t.Fatalf("change %d = %+v, want a and d removed from the finished rows", i, ch)
			}
		}
		ver, _, _, rows, err := s.FinishedSnapshot(tp)
		if err != nil || ver != v3 || len(rows) != 2 || rows[0].ID != b.ID || rows[1].ID != c.ID {
			t.Fatalf("FinishedSnapshot = %+v, %v, %v; want b and c at %+v", ver, rows, err, v3)
		}

		// No rows: no write.
		if out, err := s.UpdateStates(tp, nil, remotelog.DeleteSegmentStarted); err != nil || out != nil {
			t.Fatalf("UpdateStates of no rows = %v, %v", out, err)
		}
		if n, _ := writes(t, s); n != n0+2 || s.PartitionVersion(tp) != v3 {
			t.Fatal("UpdateStates of no rows wrote")
		}
	})
}
