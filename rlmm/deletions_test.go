package rlmm

import (
	"errors"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// finish adds rows [0,99] and [100,199] and finishes them, under topic id.
func finishTwo(t *testing.T, s *Store, topicID string) []remotelog.SegmentMetadata {
	t.Helper()
	var out []remotelog.SegmentMetadata
	for _, m := range []remotelog.SegmentMetadata{seg(0, 99), seg(100, 199)} {
		m.TopicID = topicID
		if err := s.AddSegment(m); err != nil {
			t.Fatal(err)
		}
		f, err := s.UpdateState(tp, m.StartOffset, m.ID, remotelog.CopySegmentFinished)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	if err := s.SetTopicID(tp, topicID); err != nil {
		t.Fatal(err)
	}
	return out
}

// Scheduling takes the rows out of the live metadata into the record and
// journals it; cancelling puts them back; both survive a reopen.
func TestScheduleAndCancelDeletion(t *testing.T) {
	forEachFS(t, func(t *testing.T, open func() *Store) {
		s := open()
		rows := finishTwo(t, s, "AAAAAAAAAAAAAAAAAAAAAQ")
		before, _, _ := s.Offsets(tp)
		if _, err := s.ScheduleDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAg", remotelog.ReasonOperator, "test", 5000); !errors.Is(err, ErrTopicIDMismatch) {
			t.Fatalf("schedule of another incarnation: %v", err)
		}
		d, err := s.ScheduleDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", remotelog.ReasonOperator, "operator ran it", 5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Segments) != 2 || d.Bytes() != 200 || d.State != remotelog.DeletionPending {
			t.Fatalf("record %+v", d)
		}
		if _, err := s.ScheduleDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", remotelog.ReasonOperator, "again", 5000); !errors.Is(err, ErrPartitionNotFound) {
			t.Fatalf("second schedule: %v", err)
		}
		if fin, _ := s.FinishedSegments(tp); len(fin) != 0 {
			t.Fatalf("rows still live: %v", fin)
		}
		if _, ok, _ := s.Offsets(tp); ok {
			t.Fatal("offsets still live")
		}
		s.Close()
		s = open()
		defer s.Close()
		ds, err := s.Deletions(nil)
		if err != nil || len(ds) != 1 || ds[0].Proof != "operator ran it" {
			t.Fatalf("deletions after reopen %+v %v", ds, err)
		}
		if _, err := s.CancelDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", "restored by test", true); err != nil {
			t.Fatal(err)
		}
		fin, _ := s.FinishedSegments(tp)
		if len(fin) != 2 || fin[0].ID != rows[0].ID || fin[1].ID != rows[1].ID {
			t.Fatalf("rows after cancel %+v", fin)
		}
		after, ok, _ := s.Offsets(tp)
		if after.OperatorKept != "restored by test" {
			t.Fatalf("an operator's restore is not kept: %+v", after)
		}
		if after.OperatorKept = ""; !ok || after != before {
			t.Fatalf("offsets after cancel %+v, before %+v", after, before)
		}
		j, err := s.Journal(0, 0)
		if err != nil || len(j) != 2 || j[0].Event != remotelog.JournalScheduled || j[1].Event != remotelog.JournalCancelled ||
			j[1].Detail != "restored by test" || j[0].Seq+1 != j[1].Seq || j[0].Segments != 2 {
			t.Fatalf("journal %+v %v", j, err)
		}
		if tail, _ := s.Journal(j[0].Seq, 0); len(tail) != 1 || tail[0].Seq != j[1].Seq {
			t.Fatalf("journal after seq %d: %+v", j[0].Seq, tail)
		}
	})
}

// A deletion that started cannot be cancelled; finishing it removes the
// record and journals it. Restoring over a new incarnation is refused.
func TestDeletionRunAndConflicts(t *testing.T) {
	forEachFS(t, func(t *testing.T, open func() *Store) {
		s := open()
		defer s.Close()
		finishTwo(t, s, "AAAAAAAAAAAAAAAAAAAAAQ")
		if _, err := s.ScheduleDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", remotelog.ReasonTopicDeleted, "cluster said so", 0); err != nil {
			t.Fatal(err)
		}
		// The topic is re-created and tiers again under a new id.
		finishTwo(t, s, "AAAAAAAAAAAAAAAAAAAAAg")
		if _, err := s.CancelDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", "x", false); !errors.Is(err, ErrRestoreConflict) {
			t.Fatalf("restore over a new incarnation: %v", err)
		}
		if err := s.FinishDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", "x"); err == nil {
			t.Fatal("finish of a pending deletion")
		}
		if _, err := s.StartDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", ""); err != nil { // after a crash
			t.Fatal(err)
		}
		if _, err := s.CancelDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", "x", false); !errors.Is(err, ErrDeletionInProgress) {
			t.Fatalf("cancel while deleting: %v", err)
		}
		if err := s.FinishDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", "12 objects"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CancelDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", "x", false); !errors.Is(err, ErrDeletionNotFound) {
			t.Fatalf("cancel after the end: %v", err)
		}
		if fin, _ := s.FinishedSegments(tp); len(fin) != 2 || fin[0].TopicID != "AAAAAAAAAAAAAAAAAAAAAg" {
			t.Fatalf("the new incarnation's rows %+v", fin)
		}
		var events []string
		j, _ := s.Journal(0, 0)
		for _, e := range j {
			events = append(events, e.Event)
		}
		if got := len(events); got != 3 || events[0] != "scheduled" || events[1] != "deleting" || events[2] != "deleted" {
			t.Fatalf("journal events %v", events)
		}
	})
}
