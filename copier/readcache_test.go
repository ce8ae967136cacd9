package copier

import (
	"reflect"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
)

// finishedReads counts the reads of finished rows that reach the store.
type finishedReads struct {
	MetadataStore
	n int
}

func (f *finishedReads) FinishedSegments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	f.n++
	return f.MetadataStore.FinishedSegments(tp)
}

// The read cache takes a partition's finished rows from its rows when
// the pass read those at the same generation, and they are exactly the
// store's own FinishedSegments: rows in every state, a damaged copy, a
// copy superseded by a newer one of the same offsets and one nested in
// a larger newer copy. After a write, the store is read again.
func TestCachedFinishedFromRows(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	tick := func() time.Time { now = now.Add(time.Millisecond); return now } // every write is newer than the one before
	st, err := rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem()), rlmm.WithClock(tick))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tp := remotelog.TopicPartition{Topic: "t", Partition: 3}
	if err := st.EnsurePartition(tp, 0); err != nil {
		t.Fatal(err)
	}
	add := func(start, end int64, states ...remotelog.SegmentState) remotelog.SegmentMetadata {
		t.Helper()
		m := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: start, EndOffset: end,
			SizeInBytes: 100, State: remotelog.CopySegmentStarted, BrokerID: -1}
		if err := st.AddSegment(m); err != nil {
			t.Fatal(err)
		}
		for _, to := range states {
			if m, err = st.UpdateState(tp, start, m.ID, to); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	fin, del, delDone := remotelog.CopySegmentFinished, remotelog.DeleteSegmentStarted, remotelog.DeleteSegmentFinished
	add(0, 9, fin, del, delDone)
	add(10, 19, fin, del)
	add(20, 29, fin)
	add(20, 29, fin) // supersedes the one before
	add(30, 39, fin)
	add(30, 49, fin) // covers the one before
	d := add(50, 59, fin)
	if _, err := st.MarkDamaged(tp, 50, d.ID, "the .log is missing"); err != nil {
		t.Fatal(err)
	}
	add(60, 69) // in flight
	want, err := st.FinishedSegments(tp)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 3 {
		t.Fatalf("the store lists %d finished rows, want 3: %+v", len(want), want)
	}

	reads := &finishedReads{MetadataStore: st}
	cs := &cachedStore{MetadataStore: reads, gen: st}
	if _, err := cs.Segments(tp); err != nil {
		t.Fatal(err)
	}
	got, err := cs.FinishedSegments(tp)
	if err != nil || !reflect.DeepEqual(got, want) || reads.n != 0 {
		t.Fatalf("finished rows from the cached rows: %+v, %v, %d store reads; want %+v and no read", got, err, reads.n, want)
	}
	add(70, 79, fin)
	want, _ = st.FinishedSegments(tp)
	got, err = cs.FinishedSegments(tp)
	if err != nil || !reflect.DeepEqual(got, want) || reads.n != 1 || len(got) != 4 {
		t.Fatalf("after a write: %+v, %v, %d store reads; want %+v read from the store", got, err, reads.n, want)
	}
}
