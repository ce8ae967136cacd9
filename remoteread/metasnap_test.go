package remoteread

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
)

// metaEnv is a server over a real (in-memory) Pebble store and no bucket:
// enough for the metadata part of reads.
type metaEnv struct {
	t     *testing.T
	store *rlmm.Store
	srv   *Engine
}

func newMetaEnv(t *testing.T) *metaEnv {
	t.Helper()
	store, err := rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv, err := New(DefaultConfig(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return &metaEnv{t: t, store: store, srv: srv}
}

// finish writes a finished copy of [start, end] as the copier does.
func (e *metaEnv) finish(tp remotelog.TopicPartition, start, end int64) remotelog.SegmentMetadata {
	e.t.Helper()
	m := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: start, EndOffset: end,
		SizeInBytes: 100, State: remotelog.CopySegmentStarted}
	if err := e.store.AddSegment(m); err != nil {
		e.t.Fatal(err)
	}
	m, err := e.store.UpdateState(tp, start, m.ID, remotelog.CopySegmentFinished)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *metaEnv) snap(tp remotelog.TopicPartition) *partSnap {
	e.t.Helper()
	p, err := e.srv.meta.get(tp)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// counts returns the snapshots read whole, updated, and the rows decoded.
func (e *metaEnv) counts() (loads, updates float64, decoded int64) {
	m := e.srv.meta
	return testutil.ToFloat64(m.loads), testutil.ToFloat64(m.updates), m.rowsDecoded.Load()
}

// A write to partition A updates A's snapshot from the row written, and
// leaves B's snapshot as it was: no rebuild, no row decoded.
func TestWriteToOnePartitionLeavesOthers(t *testing.T) {
	e := newMetaEnv(t)
	a, b := remotelog.TopicPartition{Topic: "a", Partition: 0}, remotelog.TopicPartition{Topic: "b", Partition: 0}
	for i := int64(0); i < 50; i++ {
		e.finish(a, i*10, i*10+9)
		e.finish(b, i*10, i*10+9)
	}
	sa, sb := e.snap(a), e.snap(b)
	loads, updates, decoded := e.counts()
	if loads != 2 || decoded != 100 {
		t.Fatalf("first reads: %v loads, %d rows decoded; want 2 and 100", loads, decoded)
	}
	if e.snap(a) != sa || e.snap(b) != sb {
		t.Fatal("a read with nothing changed did not return the cached snapshot")
	}
	e.finish(a, 500, 509)
	if _, err := e.store.AdvanceOffsets(a, 10, -1); err != nil {
		t.Fatal(err)
	}
	if got := e.snap(b); got != sb {
		t.Fatal("a write to a changed b's snapshot")
	}
	if l, u, d := e.counts(); l != loads || u != updates || d != decoded {
		t.Fatalf("after a write to a, reading b: loads %v -> %v, updates %v -> %v, rows decoded %d -> %d", loads, l, updates, u, decoded, d)
	}
	got := e.snap(a)
	if l, u, d := e.counts(); l != loads || u != updates+1 || d != decoded {
		t.Fatalf("reading a after its writes: loads %v -> %v, updates %v -> %v, rows decoded %d -> %d; want one update", loads, l, updates, u, decoded, d)
	}
	if got.fin.len() != 51 || got.offs.LogStartOffset != 10 || got.offs.HighestTieredOffset != 509 {
		t.Fatalf("a's snapshot after the writes: %d rows, offsets %+v", got.fin.len(), got.offs)
	}
	if sa.fin.len() != 50 || sa.offs.HighestTieredOffset != 499 {
		t.Fatal("the update changed the snapshot it started from")
	}
}

// A snapshot kept up to date from the store's changes equals the one read
// whole, and the store's own Snapshot, after every step of random copier
// and operator writes.
func TestSnapshotUpdatesMatchStore(t *testing.T) {
	e := newMetaEnv(t)
	tp := remotelog.TopicPartition{Topic: "t", Partition: 2}
	rng := rand.New(rand.NewPCG(3, 4))
	var finished, started []remotelog.SegmentMetadata
	finished = append(finished, e.finish(tp, 0, 9))
	e.snap(tp)
	loads, _, _ := e.counts()
	for step := 0; step < 300; step++ {
		switch k := rng.IntN(10); {
		case k < 4 || len(finished) == 0:
			start := rng.Int64N(3000)
			finished = append(finished, e.finish(tp, start, start+rng.Int64N(40)))
		case k < 5:
			start := rng.Int64N(3000)
			m := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: start, EndOffset: start + 9,
				State: remotelog.CopySegmentFinished, EventTimestampMs: rng.Int64N(1000)}
			if err := e.store.ImportSegment(m); err != nil {
				t.Fatal(err)
			}
			finished = append(finished, m)
		case k < 6:
			m := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: rng.Int64N(3000), State: remotelog.CopySegmentStarted}
			m.EndOffset = m.StartOffset + 5
			if err := e.store.AddSegment(m); err != nil {
				t.Fatal(err)
			}
			started = append(started, m)
		case k < 7 && len(started) > 0:
			m := started[0]
			started = started[1:]
			if err := e.store.ForgetSegment(tp, m.StartOffset, m.ID); err != nil {
				t.Fatal(err)
			}
		case k < 8:
			i := rng.IntN(len(finished))
			if _, err := e.store.MarkDamaged(tp, finished[i].StartOffset, finished[i].ID, fmt.Sprintf("missing %d", rng.IntN(2))); err != nil {
				t.Fatal(err)
			}
		case k < 9:
			i := rng.IntN(len(finished))
			m := finished[i]
			finished = append(finished[:i], finished[i+1:]...)
			if _, err := e.store.UpdateState(tp, m.StartOffset, m.ID, remotelog.DeleteSegmentStarted); err != nil {
				t.Fatal(err)
			}
		default:
			if _, err := e.store.AdvanceOffsets(tp, rng.Int64N(100), rng.Int64N(200)); err != nil {
				t.Fatal(err)
			}
		}
		got := e.snap(tp)
		ver, offs, ok, rows, err := e.store.FinishedSnapshot(tp)
		if err != nil {
			t.Fatal(err)
		}
		if got.ver != ver || got.offs != offs || got.ok != ok {
			t.Fatalf("step %d: snapshot %+v %+v %v, store %+v %+v %v", step, got.ver, got.offs, got.ok, ver, offs, ok)
		}
		sameList(t, fmt.Sprintf("step %d", step), got.fin, newFinList(rows), rows)
		_, _, sup, err := e.store.Snapshot(tp)
		if err != nil {
			t.Fatal(err)
		}
		if k := keptRows(got.fin); !reflect.DeepEqual(k, sup) && !(len(k) == 0 && len(sup) == 0) {
			t.Fatalf("step %d: kept rows differ from the store's Snapshot", step)
		}
	}
	if l, _, _ := e.counts(); l != loads {
		t.Fatalf("%v snapshots read whole during the writes, want none", l-loads)
	}
}

// When the store no longer has every change (a partition's deletion was
// scheduled), the snapshot is read whole again.
func TestSnapshotReloadsWhenChangesAreGone(t *testing.T) {
	e := newMetaEnv(t)
	tp := remotelog.TopicPartition{Topic: "t", Partition: 0}
	e.finish(tp, 0, 9)
	if err := e.store.SetTopicID(tp, "AAAAAAAAAAAAAAAAAAAAAA"); err != nil {
		t.Fatal(err)
	}
	if p := e.snap(tp); p.fin.len() != 1 {
		t.Fatalf("%d rows", p.fin.len())
	}
	loads, _, _ := e.counts()
	if _, err := e.store.ScheduleDeletion(tp, "AAAAAAAAAAAAAAAAAAAAAA", remotelog.ReasonTopicDeleted, "test", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.ReadRemote(t.Context(), tp, 0, 100); !errors.Is(err, ErrNotTiered) {
		t.Fatalf("read after the deletion was scheduled: %v", err)
	}
	if l, _, _ := e.counts(); l != loads+1 {
		t.Fatalf("loads %v -> %v, want one more", loads, l)
	}
	// Partitions with nothing recorded keep no snapshot.
	if _, err := e.srv.ReadRemote(t.Context(), remotelog.TopicPartition{Topic: "made-up", Partition: 7}, 0, 100); !errors.Is(err, ErrNotTiered) {
		t.Fatalf("read of a made-up partition: %v", err)
	}
	if n := len(e.srv.meta.parts); n != 0 {
		t.Fatalf("%d snapshots kept for partitions with nothing recorded", n)
	}
}
