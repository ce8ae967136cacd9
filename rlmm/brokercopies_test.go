package rlmm

import (
	"errors"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tierd/tierd/internal/remotelog"
)

// brokerCopy is a broker-owned copy's row as the RSM endpoint records it.
func brokerCopy(tp remotelog.TopicPartition, start, end int64) remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{TopicPartition: tp, TopicID: "B3_HiNPgSQ6oxG9ZZ6ED5A", ID: remotelog.NewSegmentID(), StartOffset: start, EndOffset: end,
		MaxTimestampMs: 1_700_000_000_000 + end, SizeInBytes: 1 << 20, State: remotelog.CopySegmentStarted, BrokerID: 1,
		SegmentLeaderEpochs: []remotelog.EpochEntry{{Epoch: 3, StartOffset: start}}}
}

// ids returns the segment ids of rows, in order.
func ids(rows []remotelog.SegmentMetadata) []remotelog.SegmentID {
	out := make([]remotelog.SegmentID, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// TestBrokerCopies: rows recorded, read back by key, by id and by
// partition (ordered by start offset), moved by Kafka's transitions only,
// replaced by a retried copy of the same id, forgotten and purged; the
// partitions listed in order; and all of it kept across a restart.
func TestBrokerCopies(t *testing.T) {
	forEachFS(t, func(t *testing.T, open func() *Store) {
		now := time.UnixMilli(1_700_000_000_000)
		s := open()
		s.now = func() time.Time { return now }
		orders10 := remotelog.TopicPartition{Topic: "orders", Partition: 10}
		payments := remotelog.TopicPartition{Topic: "payments", Partition: 0}
		b, a, c := brokerCopy(tp, 206, 411), brokerCopy(tp, 0, 205), brokerCopy(tp, 412, 600)
		other, pay := brokerCopy(orders10, 0, 99), brokerCopy(payments, 50, 60)
		for _, m := range []remotelog.SegmentMetadata{b, a, c, other, pay} {
			if err := s.PutBrokerCopy(m); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := s.BrokerCopies(tp)
		if err != nil || !slices.Equal(ids(rows), []remotelog.SegmentID{a.ID, b.ID, c.ID}) {
			t.Fatalf("BrokerCopies = %v, %v; want by start offset", rows, err)
		}
		if rows[0].EventTimestampMs != now.UnixMilli() || rows[0].SizeInBytes != 1<<20 || rows[0].TopicID != a.TopicID || !reflect.DeepEqual(rows[0].SegmentLeaderEpochs, a.SegmentLeaderEpochs) {
			t.Errorf("row as read: %+v", rows[0])
		}
		if got, err := s.BrokerCopy(tp, 206, b.ID); err != nil || got.ID != b.ID || got.EndOffset != 411 {
			t.Errorf("BrokerCopy = %+v, %v", got, err)
		}
		if got, err := s.BrokerCopyByID(tp, c.ID); err != nil || got.StartOffset != 412 {
			t.Errorf("BrokerCopyByID = %+v, %v", got, err)
		}
		for _, err := range []error{
			func() error { _, err := s.BrokerCopy(tp, 207, b.ID); return err }(),
			func() error { _, err := s.BrokerCopyByID(orders10, b.ID); return err }(),
			func() error {
				_, err := s.SetBrokerCopyState(tp, 0, remotelog.NewSegmentID(), remotelog.CopySegmentFinished)
				return err
			}(),
			s.ForgetBrokerCopy(tp, 0, remotelog.NewSegmentID()),
		} {
			if !errors.Is(err, ErrSegmentNotFound) {
				t.Errorf("a missing row: %v, want ErrSegmentNotFound", err)
			}
		}
		if parts, err := s.BrokerPartitions(); err != nil || !slices.Equal(parts, []remotelog.TopicPartition{tp, orders10, payments}) {
			t.Errorf("BrokerPartitions = %v, %v", parts, err)
		}

		// Kafka's transitions, and only those.
		now = now.Add(time.Second)
		if got, err := s.SetBrokerCopyState(tp, 0, a.ID, remotelog.CopySegmentFinished); err != nil || got.State != remotelog.CopySegmentFinished || got.EventTimestampMs != now.UnixMilli() {
			t.Fatalf("STARTED -> FINISHED = %+v, %v", got, err)
		}
		for _, to := range []remotelog.SegmentState{remotelog.CopySegmentStarted, remotelog.CopySegmentFinished, remotelog.DeleteSegmentFinished} {
			if got, err := s.SetBrokerCopyState(tp, 0, a.ID, to); !errors.Is(err, remotelog.ErrIllegalTransition) || got.State != remotelog.CopySegmentFinished {
				t.Errorf("FINISHED -> %s = %s, %v; want refused", to, got.State, err)
			}
		}
		for _, to := range []remotelog.SegmentState{remotelog.DeleteSegmentStarted, remotelog.DeleteSegmentStarted, remotelog.DeleteSegmentFinished} {
			if _, err := s.SetBrokerCopyState(tp, 0, a.ID, to); err != nil {
				t.Fatalf("-> %s: %v", to, err)
			}
		}
		if _, err := s.SetBrokerCopyState(tp, 0, a.ID, remotelog.DeleteSegmentStarted); !errors.Is(err, remotelog.ErrIllegalTransition) {
			t.Errorf("DELETE_SEGMENT_FINISHED -> DELETE_SEGMENT_STARTED: %v", err)
		}

		// A retried copy of the same segment id replaces its row, at the
		// same start offset or at another.
		retry := b
		retry.SizeInBytes, retry.MaxTimestampMs = 2<<20, 42
		if err := s.PutBrokerCopy(retry); err != nil {
			t.Fatal(err)
		}
		moved := c
		moved.StartOffset, moved.EndOffset = 413, 600
		if err := s.PutBrokerCopy(moved); err != nil {
			t.Fatal(err)
		}
		rows, _ = s.BrokerCopies(tp)
		if len(rows) != 3 || rows[1].ID != b.ID || rows[1].SizeInBytes != 2<<20 || rows[1].MaxTimestampMs != 42 || rows[2].StartOffset != 413 {
			t.Fatalf("rows after the retried copies: %+v", rows)
		}
		if got, err := s.BrokerCopyByID(tp, c.ID); err != nil || got.StartOffset != 413 {
			t.Errorf("BrokerCopyByID after a retry at another start offset = %+v, %v", got, err)
		}

		// A restart keeps everything.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open()
		defer s.Close()
		s.now = func() time.Time { return now }
		again, err := s.BrokerCopies(tp)
		if err != nil || !reflect.DeepEqual(again, rows) {
			t.Fatalf("after a restart: %+v, %v; want %+v", again, err, rows)
		}
		if parts, err := s.BrokerPartitions(); err != nil || len(parts) != 3 {
			t.Errorf("BrokerPartitions after a restart = %v, %v", parts, err)
		}

		// Purge removes DELETE_SEGMENT_FINISHED rows older than the bound
		// only; forget removes a row in any state, with its id entry.
		if n, err := s.PurgeBrokerCopies(tp, now.UnixMilli()); err != nil || n != 0 {
			t.Errorf("purge before the row's time = %d, %v", n, err)
		}
		if n, err := s.PurgeBrokerCopies(tp, now.UnixMilli()+1); err != nil || n != 1 {
			t.Errorf("purge = %d, %v; want the deleted row", n, err)
		}
		if _, err := s.BrokerCopyByID(tp, a.ID); !errors.Is(err, ErrSegmentNotFound) {
			t.Errorf("a purged row by id: %v", err)
		}
		if err := s.ForgetBrokerCopy(tp, 206, b.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.BrokerCopyByID(tp, b.ID); !errors.Is(err, ErrSegmentNotFound) {
			t.Errorf("a forgotten row by id: %v", err)
		}
		if err := s.ForgetBrokerCopy(orders10, 0, other.ID); err != nil {
			t.Fatal(err)
		}
		if parts, err := s.BrokerPartitions(); err != nil || !slices.Equal(parts, []remotelog.TopicPartition{tp, payments}) {
			t.Errorf("BrokerPartitions after the partition's last row went = %v, %v", parts, err)
		}
	})
}

// TestBrokerCopyRefused: rows that are not a segment's are refused and
// write nothing.
func TestBrokerCopyRefused(t *testing.T) {
	s, err := Open(Config{Dir: "db"}, WithFS(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	noTopic := brokerCopy(tp, 0, 9)
	noTopic.TopicPartition.Topic = ""
	backwards := brokerCopy(tp, 10, 9)
	negative := brokerCopy(tp, -1, 9)
	badState := brokerCopy(tp, 0, 9)
	badState.State = 7
	for _, m := range []remotelog.SegmentMetadata{noTopic, backwards, negative, badState} {
		if err := s.PutBrokerCopy(m); err == nil {
			t.Errorf("PutBrokerCopy(%+v) took it", m)
		}
	}
	if parts, err := s.BrokerPartitions(); err != nil || len(parts) != 0 {
		t.Errorf("rows after refusals: %v, %v", parts, err)
	}
}

// TestBrokerCopiesApart: broker-owned copies' rows never show through
// the methods tierd's copier and readers use (Partitions, Segments,
// FinishedSegments, FinishedSnapshot, Snapshot, Offsets, the change log,
// the Generation), even for a partition that has rows of both kinds,
// and tierd's own rows never show as broker copies.
func TestBrokerCopiesApart(t *testing.T) {
	forEachFS(t, func(t *testing.T, open func() *Store) {
		s := open()
		defer s.Close()
		own := seg(0, 99)
		if err := s.AddSegment(own); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateState(tp, 0, own.ID, remotelog.CopySegmentFinished); err != nil {
			t.Fatal(err)
		}
		onlyBroker := remotelog.TopicPartition{Topic: "broker-only", Partition: 0}
		gen, ver, verOnly := s.Generation(), s.PartitionVersion(tp), s.PartitionVersion(onlyBroker)
		synced := testutil.ToFloat64(s.syncedWrites)
		for _, m := range []remotelog.SegmentMetadata{brokerCopy(tp, 0, 99), brokerCopy(tp, 100, 199), brokerCopy(onlyBroker, 0, 9)} {
			if err := s.PutBrokerCopy(m); err != nil {
				t.Fatal(err)
			}
			if _, err := s.SetBrokerCopyState(m.TopicPartition, m.StartOffset, m.ID, remotelog.CopySegmentFinished); err != nil {
				t.Fatal(err)
			}
		}
		if got := testutil.ToFloat64(s.syncedWrites) - synced; got != 6 {
			t.Errorf("broker copy writes counted %v synced writes, want 6", got)
		}
		if s.Generation() != gen || s.PartitionVersion(tp) != ver || s.PartitionVersion(onlyBroker) != verOnly {
			t.Errorf("broker copy writes changed the generation or a partition's version")
		}
		if chs, _, ok := s.ChangesSince(tp, ver); !ok || len(chs) != 0 {
			t.Errorf("ChangesSince after broker copy writes = %v, %v", chs, ok)
		}
		if parts, err := s.Partitions(); err != nil || !slices.Equal(parts, []remotelog.TopicPartition{tp}) {
			t.Errorf("Partitions = %v, %v; want tierd's own only", parts, err)
		}
		for _, p := range []remotelog.TopicPartition{tp, onlyBroker} {
			rows, err := s.Segments(p)
			if err != nil {
				t.Fatal(err)
			}
			fin, err := s.FinishedSegments(p)
			if err != nil {
				t.Fatal(err)
			}
			_, off, ok, snap, err := s.FinishedSnapshot(p)
			if err != nil {
				t.Fatal(err)
			}
			_, ok2, rows2, err := s.Snapshot(p)
			if err != nil {
				t.Fatal(err)
			}
			want := []remotelog.SegmentID(nil)
			if p == tp {
				want = []remotelog.SegmentID{own.ID}
			}
			for name, got := range map[string][]remotelog.SegmentMetadata{"Segments": rows, "FinishedSegments": fin, "FinishedSnapshot": snap, "Snapshot": rows2} {
				if !slices.Equal(ids(got), want) {
					t.Errorf("%s(%s) = %v, want %v", name, p, ids(got), want)
				}
			}
			if p == onlyBroker && (ok || ok2 || off.HighestTieredOffset != -1) {
				t.Errorf("offsets of a partition with broker copies only: %+v, %v, %v", off, ok, ok2)
			}
		}
		if off, _, _ := s.Offsets(tp); off.HighestTieredOffset != 99 {
			t.Errorf("a broker copy moved the highest tiered offset: %+v", off)
		}
		got, err := s.BrokerCopies(tp)
		if err != nil || len(got) != 2 || slices.Contains(ids(got), own.ID) {
			t.Errorf("BrokerCopies = %v, %v; want the two broker copies", ids(got), err)
		}
		if _, err := s.BrokerCopy(tp, 0, own.ID); !errors.Is(err, ErrSegmentNotFound) {
			t.Errorf("tierd's own row as a broker copy: %v", err)
		}
		if _, err := s.Segment(tp, 0, got[0].ID); !errors.Is(err, ErrSegmentNotFound) {
			t.Errorf("a broker copy as tierd's own row: %v", err)
		}
		if n, err := s.PurgeDeleted(tp, 1<<62); err != nil || n != 0 {
			t.Errorf("PurgeDeleted = %d, %v", n, err)
		}
	})
}

// TestBrokerCopyMetricsAndHealth: each row written counts in
// tierd_rlmm_broker_copy_transitions_total by the state it entered, and
// a store below min_free_bytes refuses broker copy writes as it refuses
// the others, writing nothing.
func TestBrokerCopyMetricsAndHealth(t *testing.T) {
	fs := newFaultFS(vfs.NewMem())
	reg := prometheus.NewRegistry()
	s, err := Open(Config{Dir: "db", MinFreeBytes: 1 << 20}, WithFS(fs), WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.spaceTTL = 0
	m := brokerCopy(tp, 0, 9)
	if err := s.PutBrokerCopy(m); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetBrokerCopyState(tp, 0, m.ID, remotelog.CopySegmentFinished); err != nil {
		t.Fatal(err)
	}
	for st, want := range map[remotelog.SegmentState]float64{remotelog.CopySegmentStarted: 1, remotelog.CopySegmentFinished: 1, remotelog.DeleteSegmentStarted: 0} {
		if got := testutil.ToFloat64(s.brokerTransitions.WithLabelValues(st.String())); got != want {
			t.Errorf("broker copy transitions to %s = %v, want %v", st, got, want)
		}
	}
	if got := testutil.ToFloat64(s.transitions.WithLabelValues(remotelog.CopySegmentStarted.String())); got != 0 {
		t.Errorf("broker copies counted as tierd's own rows: %v", got)
	}
	fs.free.Store(512 << 10)
	if _, err := s.SetBrokerCopyState(tp, 0, m.ID, remotelog.DeleteSegmentStarted); !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("SetBrokerCopyState below min_free_bytes: %v", err)
	}
	if err := s.PutBrokerCopy(brokerCopy(tp, 10, 19)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PutBrokerCopy below min_free_bytes: %v", err)
	}
	fs.free.Store(-1)
	rows, err := s.BrokerCopies(tp)
	if err != nil || len(rows) != 1 || rows[0].State != remotelog.CopySegmentFinished {
		t.Fatalf("rows after refused writes: %+v, %v", rows, err)
	}
}

// TestCarryOverBrokerCopies: a rebuild's CarryOver brings the broker
// copies' rows along (no manifest of tierd's own copies can rebuild them).
func TestCarryOverBrokerCopies(t *testing.T) {
	from, err := Open(Config{Dir: "old"}, WithFS(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	to, err := Open(Config{Dir: "new"}, WithFS(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	m := brokerCopy(tp, 0, 9)
	if err := from.PutBrokerCopy(m); err != nil {
		t.Fatal(err)
	}
	if _, _, err := to.CarryOver(from); err != nil {
		t.Fatal(err)
	}
	if got, err := to.BrokerCopyByID(tp, m.ID); err != nil || got.StartOffset != 0 {
		t.Fatalf("carried broker copy: %+v, %v", got, err)
	}
	if parts, err := to.Partitions(); err != nil || len(parts) != 0 {
		t.Errorf("CarryOver of broker copies made partitions: %v, %v", parts, err)
	}
}
