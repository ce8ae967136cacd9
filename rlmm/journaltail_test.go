package rlmm

import (
	"fmt"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// JournalTail returns the newest entries, newest first, and no more than
// asked for; on an empty journal, none.
func TestJournalTail(t *testing.T) {
	forEachFS(t, func(t *testing.T, open func() *Store) {
		s := open()
		defer s.Close()
		if es, err := s.JournalTail(5); err != nil || len(es) != 0 {
			t.Fatalf("empty journal: %v %v", es, err)
		}
		finishTwo(t, s, "AAAAAAAAAAAAAAAAAAAAAQ")
		for i := 0; i < 3; i++ { // 6 entries: scheduled, cancelled, three times
			if _, err := s.ScheduleDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", remotelog.ReasonOperator, fmt.Sprint("order ", i), 5000); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CancelDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAQ", fmt.Sprint("restored ", i), true); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.Journal(0, 0)
		if err != nil || len(all) != 6 {
			t.Fatalf("journal: %d entries, %v", len(all), err)
		}
		tail, err := s.JournalTail(4)
		if err != nil || len(tail) != 4 {
			t.Fatalf("tail: %v %v", tail, err)
		}
		for i, e := range tail {
			if want := all[len(all)-1-i]; e.Seq != want.Seq || e.Event != want.Event || e.Detail != want.Detail {
				t.Errorf("tail[%d] = %+v, want %+v", i, e, want)
			}
		}
		if tail, _ := s.JournalTail(100); len(tail) != 6 || tail[5].Seq != all[0].Seq {
			t.Errorf("tail of 100: %d entries", len(tail))
		}
		if tail, _ := s.JournalTail(0); tail != nil {
			t.Errorf("tail of 0: %v", tail)
		}
	})
}
