package rlmm

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/internal/remotelog"
)

var tp = remotelog.TopicPartition{Topic: "orders", Partition: 3}

// forEachFS runs a test on an in-memory Pebble FS and on a real directory.
func forEachFS(t *testing.T, fn func(t *testing.T, open func() *Store)) {
	t.Run("mem", func(t *testing.T) {
		fs := vfs.NewMem()
		fn(t, func() *Store {
			s, err := Open(Config{Dir: "db"}, WithFS(fs))
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("disk", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "db")
		fn(t, func() *Store {
			s, err := Open(Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

func seg(start, end int64) remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: start, EndOffset: end,
		SizeInBytes: 100, State: remotelog.CopySegmentStarted, MaxTimestampMs: 1000 + start}
}

func TestLifecycle(t *testing.T) {
	forEachFS(t, func(t *testing.T, open func() *Store) {
		s := open()
		a, b := seg(0, 205), seg(206, 411)
		for _, m := range []remotelog.SegmentMetadata{a, b} {
			if err := s.AddSegment(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddSegment(a); !errors.Is(err, ErrSegmentExists) {
			t.Fatalf("duplicate add: %v", err)
		}
		bad := seg(500, 600)
		bad.State = remotelog.CopySegmentFinished
		if err := s.AddSegment(bad); !errors.Is(err, remotelog.ErrIllegalTransition) {
			t.Fatalf("add in FINISHED: %v", err)
		}
		off, ok, _ := s.Offsets(tp)
		if !ok || off.HighestTieredOffset != -1 || off.LogStartOffset != 0 {
			t.Fatalf("offsets %+v %v", off, ok)
		}
		if _, err := s.UpdateState(tp, 0, a.ID, remotelog.CopySegmentFinished); err != nil {
			t.Fatal(err)
		}
		if fin, _ := s.FinishedSegments(tp); len(fin) != 1 || fin[0].ID != a.ID {
			t.Fatalf("finished %v", fin)
		}
		off, _, _ = s.Offsets(tp)
		if off.HighestTieredOffset != 205 {
			t.Fatalf("highest tiered %d", off.HighestTieredOffset)
		}
		// Illegal transitions are refused and change nothing.
		for _, to := range []remotelog.SegmentState{remotelog.CopySegmentStarted, remotelog.DeleteSegmentFinished, remotelog.CopySegmentFinished} {
			if _, err := s.UpdateState(tp, 0, a.ID, to); !errors.Is(err, remotelog.ErrIllegalTransition) {
				t.Errorf("FINISHED -> %s: %v", to, err)
			}
		}
		if _, err := s.UpdateState(tp, 7, a.ID, remotelog.DeleteSegmentStarted); !errors.Is(err, ErrSegmentNotFound) {
			t.Errorf("wrong start offset: %v", err)
		}
		for _, to := range []remotelog.SegmentState{remotelog.DeleteSegmentStarted, remotelog.DeleteSegmentStarted, remotelog.DeleteSegmentFinished} {
			if _, err := s.UpdateState(tp, 0, a.ID, to); err != nil {
				t.Fatalf("-> %s: %v", to, err)
			}
		}
		if _, err := s.UpdateState(tp, 0, a.ID, remotelog.DeleteSegmentStarted); !errors.Is(err, remotelog.ErrIllegalTransition) {
			t.Errorf("out of DELETE_SEGMENT_FINISHED: %v", err)
		}
		// Offsets only move forward, and the local one never below the log's.
		if o, err := s.AdvanceOffsets(tp, 206, -1); err != nil || o.LogStartOffset != 206 || o.LocalLogStartOffset != 0 {
			t.Fatalf("advance: %+v %v", o, err)
		}
		if o, _ := s.AdvanceOffsets(tp, 100, 412); o.LogStartOffset != 206 || o.LocalLogStartOffset != 412 {
			t.Fatalf("moved back: %+v", o)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		// Everything is durable across a reopen.
		s = open()
		defer s.Close()
		all, err := s.Segments(tp)
		if err != nil || len(all) != 2 || all[0].State != remotelog.DeleteSegmentFinished || all[1].State != remotelog.CopySegmentStarted {
			t.Fatalf("after reopen: %+v %v", all, err)
		}
		if off, _, _ := s.Offsets(tp); off.LogStartOffset != 206 || off.HighestTieredOffset != 205 {
			t.Fatalf("offsets after reopen %+v", off)
		}
		if ps, _ := s.Partitions(); len(ps) != 1 || ps[0] != tp {
			t.Fatalf("partitions %v", ps)
		}
	})
}

func TestOrderingAndIsolation(t *testing.T) {
	s, err := Open(Config{Dir: "db"}, WithFS(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other := remotelog.TopicPartition{Topic: "orders", Partition: 30}
	prefixTopic := remotelog.TopicPartition{Topic: "orders2", Partition: 3}
	for _, start := range []int64{1 << 40, 5, 300, 0} {
		m := seg(start, start+4)
		s.AddSegment(m)
		for _, o := range []remotelog.TopicPartition{other, prefixTopic} {
			m2 := m
			m2.TopicPartition, m2.ID = o, remotelog.NewSegmentID()
			s.AddSegment(m2)
		}
	}
	all, _ := s.Segments(tp)
	if len(all) != 4 || all[0].StartOffset != 0 || all[1].StartOffset != 5 || all[2].StartOffset != 300 || all[3].StartOffset != 1<<40 {
		t.Fatalf("order %v", all)
	}
}

func TestSupersede(t *testing.T) {
	old := seg(0, 99)
	old.EventTimestampMs = 1
	newer := seg(0, 99)
	newer.EventTimestampMs = 2
	next := seg(100, 199)
	next.EventTimestampMs = 1
	partial := seg(50, 149)
	partial.EventTimestampMs = 3
	got := Supersede([]remotelog.SegmentMetadata{next, old, newer, partial})
	if len(got) != 3 || got[0].ID != newer.ID || got[1].ID != partial.ID || got[2].ID != next.ID {
		t.Fatalf("got %+v", got)
	}
}

func TestEventTimestamps(t *testing.T) {
	now := time.UnixMilli(5000)
	s, err := Open(Config{Dir: "db"}, WithFS(vfs.NewMem()), WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := seg(0, 9)
	s.AddSegment(m)
	now = now.Add(time.Second)
	got, _ := s.UpdateState(tp, 0, m.ID, remotelog.CopySegmentFinished)
	if got.EventTimestampMs != 6000 {
		t.Fatalf("event timestamp %d", got.EventTimestampMs)
	}
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("empty dir accepted")
	}
}

// The finished family tracks the rows' states; purge and reset work.
func TestFinishedIndexPurgeReset(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	s, err := Open(Config{Dir: "db"}, WithFS(vfs.NewMem()), WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := seg(0, 9), seg(10, 19)
	s.AddSegment(a)
	s.AddSegment(b)
	s.UpdateState(tp, 0, a.ID, remotelog.CopySegmentFinished)
	s.UpdateState(tp, 10, b.ID, remotelog.CopySegmentFinished)
	off, ok, fin, err := s.Snapshot(tp)
	if err != nil || !ok || len(fin) != 2 || off.HighestTieredOffset != 19 {
		t.Fatalf("snapshot %+v %v %v", off, fin, err)
	}
	s.UpdateState(tp, 0, a.ID, remotelog.DeleteSegmentStarted)
	if fin, _ := s.FinishedSegments(tp); len(fin) != 1 || fin[0].ID != b.ID {
		t.Fatalf("finished after a delete started: %v", fin)
	}
	s.UpdateState(tp, 0, a.ID, remotelog.DeleteSegmentFinished)
	if n, err := s.PurgeDeleted(tp, now.UnixMilli()); err != nil || n != 0 {
		t.Fatalf("purged a fresh row: %d %v", n, err)
	}
	now = now.Add(time.Hour)
	if n, err := s.PurgeDeleted(tp, now.UnixMilli()); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if rows, _ := s.Segments(tp); len(rows) != 1 {
		t.Fatalf("rows after purge %v", rows)
	}
	s.SetTopicID(tp, "old-id")
	s.SetTopicID(tp, "ignored")
	if off, _, _ := s.Offsets(tp); off.TopicID != "old-id" {
		t.Fatalf("topic id %q", off.TopicID)
	}
	if err := s.ResetPartition(tp, 0, "new-id"); err != nil {
		t.Fatal(err)
	}
	if off, _, _ := s.Offsets(tp); off.TopicID != "new-id" || off.HighestTieredOffset != -1 || off.LogStartOffset != 0 {
		t.Fatalf("after reset %+v", off)
	}
}

// A store written before the finished-row family existed gets it
// backfilled on open, so finished copies stay visible.
func TestMigrationBackfillsFinished(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open(Config{Dir: "db"}, WithFS(fs))
	if err != nil {
		t.Fatal(err)
	}
	m := seg(0, 9)
	s.AddSegment(m)
	s.UpdateState(tp, 0, m.ID, remotelog.CopySegmentFinished)
	// Make it look like the old layout: no 'f' keys, no schema version.
	s.db().Delete(finishedKey(tp, 0, m.ID), nil)
	s.db().Delete(schemaKey, nil)
	s.Close()
	s, err = Open(Config{Dir: "db"}, WithFS(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fin, _ := s.FinishedSegments(tp); len(fin) != 1 || fin[0].ID != m.ID {
		t.Fatalf("finished after migration: %v", fin)
	}
}
