package rlmm

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tierd/tierd/internal/remotelog"
)

// writes returns the store's synced writes (the metric) and the bytes
// Pebble's WAL took, which any write of any path adds to.
func writes(t *testing.T, s *Store) (synced float64, walBytes uint64) {
	t.Helper()
	return testutil.ToFloat64(s.syncedWrites), s.db().Metrics().WAL.BytesIn
}

// Writes that would change nothing make no Pebble write; the same calls
// with new values make one synced write each.
func TestNoOpWritesMakeNoWrite(t *testing.T) {
	forEachFS(t, func(t *testing.T, open func() *Store) {
		s := open()
		defer s.Close()
		a := seg(0, 9)
		if err := s.AddSegment(a); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateState(tp, a.StartOffset, a.ID, remotelog.CopySegmentFinished); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AdvanceOffsets(tp, 5, 7); err != nil {
			t.Fatal(err)
		}
		if err := s.SetTopicID(tp, "id-1"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetClusterID("cluster-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkDamaged(tp, a.StartOffset, a.ID, "no .index"); err != nil {
			t.Fatal(err)
		}
		other := remotelog.TopicPartition{Topic: "other", Partition: 0}
		if err := s.ResetPartition(other, 100, "id-2"); err != nil {
			t.Fatal(err)
		}
		synced, wal := writes(t, s)
		v := s.PartitionVersion(tp)
		noops := []struct {
			name string
			fn   func() error
		}{
			{"EnsurePartition of a recorded partition", func() error { return s.EnsurePartition(tp, 0) }},
			{"AdvanceOffsets to the same offsets", func() error { _, err := s.AdvanceOffsets(tp, 5, 7); return err }},
			{"AdvanceOffsets to lower offsets", func() error { _, err := s.AdvanceOffsets(tp, 3, -1); return err }},
			{"SetTopicID when one is recorded", func() error { return s.SetTopicID(tp, "id-3") }},
			{"SetClusterID of the recorded id", func() error { return s.SetClusterID("cluster-1") }},
			{"MarkDamaged with the recorded reason", func() error { _, err := s.MarkDamaged(tp, a.StartOffset, a.ID, "no .index"); return err }},
			{"ResetPartition to the same offsets", func() error { return s.ResetPartition(other, 100, "id-2") }},
			{"PurgeDeleted with nothing to purge", func() error { _, err := s.PurgeDeleted(tp, 1<<62); return err }},
		}
		for _, op := range noops {
			if err := op.fn(); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			if gs, gw := writes(t, s); gs != synced || gw != wal {
				t.Fatalf("%s wrote: synced writes %v -> %v, WAL bytes %d -> %d", op.name, synced, gs, wal, gw)
			}
		}
		if got := s.PartitionVersion(tp); got != v {
			t.Fatalf("version moved from %+v to %+v with no write", v, got)
		}
		if _, err := s.AdvanceOffsets(tp, 6, -1); err != nil {
			t.Fatal(err)
		}
		if gs, gw := writes(t, s); gs != synced+1 || gw <= wal {
			t.Fatalf("AdvanceOffsets to a new offset: synced writes %v -> %v, WAL bytes %d -> %d, want one write", synced, gs, wal, gw)
		}
	})
}

// A write to one partition moves that partition's version only, and
// ChangesSince gives exactly the finished rows and offsets written.
func TestChangesSince(t *testing.T) {
	s, err := Open(Config{Dir: "db"}, WithFS(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other := remotelog.TopicPartition{Topic: "other", Partition: 1}
	if err := s.EnsurePartition(other, 0); err != nil {
		t.Fatal(err)
	}
	v0, vOther := s.PartitionVersion(tp), s.PartitionVersion(other)
	a, b := seg(0, 9), seg(10, 19)
	for _, m := range []remotelog.SegmentMetadata{a, b} {
		if err := s.AddSegment(m); err != nil {
			t.Fatal(err)
		}
	}
	v1 := s.PartitionVersion(tp)
	if v1 == v0 || s.PartitionVersion(other) != vOther {
		t.Fatalf("versions after writes to %s: %+v -> %+v, %s: %+v -> %+v", tp, v0, v1, other, vOther, s.PartitionVersion(other))
	}
	if _, err := s.UpdateState(tp, a.StartOffset, a.ID, remotelog.CopySegmentFinished); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateState(tp, b.StartOffset, b.ID, remotelog.CopySegmentFinished); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateState(tp, a.StartOffset, a.ID, remotelog.DeleteSegmentStarted); err != nil {
		t.Fatal(err)
	}
	changes, now, ok := s.ChangesSince(tp, v1)
	if !ok || now != s.PartitionVersion(tp) || len(changes) != 3 {
		t.Fatalf("ChangesSince = %d changes, %+v, %v; want 3 up to %+v", len(changes), now, ok, s.PartitionVersion(tp))
	}
	want := []struct {
		id       remotelog.SegmentID
		set      bool
		highest  int64
		hasOffs  bool
		rowState remotelog.SegmentState
	}{{a.ID, true, 9, true, remotelog.CopySegmentFinished}, {b.ID, true, 19, true, remotelog.CopySegmentFinished}, {a.ID, false, 0, false, 0}}
	for i, c := range changes {
		w := want[i]
		if len(c.Finished) != 1 || c.Finished[0].ID != w.id || (c.Finished[0].Row != nil) != w.set || (c.Offsets != nil) != w.hasOffs {
			t.Fatalf("change %d = %+v, want %+v", i, c, w)
		}
		if w.set && c.Finished[0].Row.State != w.rowState {
			t.Fatalf("change %d row state %s", i, c.Finished[0].Row.State)
		}
		if w.hasOffs && c.Offsets.HighestTieredOffset != w.highest {
			t.Fatalf("change %d offsets %+v", i, *c.Offsets)
		}
	}
	// From the newest version there is nothing to apply.
	if changes, _, ok := s.ChangesSince(tp, now); !ok || len(changes) != 0 {
		t.Fatalf("ChangesSince(now) = %v, %v", changes, ok)
	}
	// The full read agrees with the changes: b is the only finished row.
	ver, offs, ok, rows, err := s.FinishedSnapshot(tp)
	if err != nil || !ok || ver != now || len(rows) != 1 || rows[0].ID != b.ID || offs.HighestTieredOffset != 19 {
		t.Fatalf("FinishedSnapshot = %+v, %+v, %v, %v, %v", ver, offs, ok, rows, err)
	}
}

// Readers reload (ok false) when the changes since their version are no
// longer all kept: the ring overflowed, a write failed, or a partition's
// deletion was scheduled.
func TestChangesSinceAsksForReload(t *testing.T) {
	t.Run("ring overflowed", func(t *testing.T) {
		s, err := Open(Config{Dir: "db"}, WithFS(vfs.NewMem()))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.changes.size = 4
		other := remotelog.TopicPartition{Topic: "other", Partition: 0}
		v := s.PartitionVersion(tp)
		if err := s.EnsurePartition(tp, 0); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if _, err := s.AdvanceOffsets(other, int64(i+1), -1); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, ok := s.ChangesSince(tp, v); !ok {
			t.Fatal("ChangesSince failed with the change still in the ring")
		}
		if _, err := s.AdvanceOffsets(other, 10, -1); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := s.ChangesSince(tp, v); ok {
			t.Fatal("ChangesSince succeeded after the change left the ring")
		}
		if _, _, ok := s.ChangesSince(tp, s.PartitionVersion(tp)); !ok {
			t.Fatal("ChangesSince from the newest version failed")
		}
	})
	t.Run("write failed", func(t *testing.T) {
		fs := newFaultFS(vfs.NewMem())
		s, err := Open(Config{Dir: "db", MinFreeBytes: 1 << 20}, WithFS(fs))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.spaceTTL = 0
		v := s.PartitionVersion(tp)
		fs.free.Store(512 << 10)
		if err := s.AddSegment(seg(0, 9)); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("AddSegment on a full dir: %v", err)
		}
		fs.free.Store(-1)
		if s.PartitionVersion(tp) == v {
			t.Fatal("a failed write left the version as it was")
		}
		if _, _, ok := s.ChangesSince(tp, v); ok {
			t.Fatal("ChangesSince succeeded across a failed write")
		}
	})
	t.Run("deletion scheduled", func(t *testing.T) {
		s, err := Open(Config{Dir: "db"}, WithFS(vfs.NewMem()))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.EnsurePartition(tp, 0); err != nil {
			t.Fatal(err)
		}
		v := s.PartitionVersion(tp)
		if _, err := s.ScheduleDeletion(tp, "", remotelog.ReasonTopicDeleted, "proof", 0); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := s.ChangesSince(tp, v); ok {
			t.Fatal("ChangesSince succeeded across a scheduled deletion")
		}
		if _, _, ok, rows, err := s.FinishedSnapshot(tp); err != nil || ok || len(rows) != 0 {
			t.Fatalf("FinishedSnapshot after the deletion = %v, %v, %v", ok, rows, err)
		}
	})
}

// After the store reopens its Pebble instance (a write failed and the
// directory takes writes again), every version is new and readers
// reload.
func TestNewInstanceNewVersion(t *testing.T) {
	fs := newFaultFS(vfs.NewMem())
	s, err := Open(Config{Dir: "db"}, WithFS(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.retryMin = time.Millisecond
	other := remotelog.TopicPartition{Topic: "other", Partition: 0}
	if err := s.EnsurePartition(other, 0); err != nil {
		t.Fatal(err)
	}
	v := s.PartitionVersion(other)
	fs.readOnly.Store(true)
	if err := s.EnsurePartition(tp, 0); err == nil {
		t.Fatal("a write to a read-only dir succeeded")
	}
	fs.readOnly.Store(false)
	waitHealthy(t, s)
	if got := s.PartitionVersion(other); got == v || got.Epoch == v.Epoch {
		t.Fatalf("version of an untouched partition across a new instance: %+v -> %+v", v, got)
	}
	if _, _, ok := s.ChangesSince(other, v); ok {
		t.Fatal("ChangesSince succeeded across a new instance")
	}
}
