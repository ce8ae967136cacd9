package deleter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"

	"github.com/tierd/tierd/copier/retention"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// fake is a Store and a Bucket over rows held in memory; it records each
// call that changes something, in order, in calls.
type fake struct {
	rows      map[remotelog.SegmentID]remotelog.SegmentMetadata
	order     []remotelog.SegmentID
	calls     []string
	failDel   map[remotelog.SegmentID]bool // DeleteSegment fails
	failAbort bool                         // AbortUploads and AbortUploadsOf fail
	fenced    bool                         // CheckFence says rsm.ErrFenced
	journaled map[remotelog.SegmentID]bool // copies a journal of their own names: their objects go without a row
}

var errBucket = errors.New("bucket down")

func newFake(rows ...remotelog.SegmentMetadata) *fake {
	f := &fake{rows: map[remotelog.SegmentID]remotelog.SegmentMetadata{}, failDel: map[remotelog.SegmentID]bool{}}
	for _, r := range rows {
		f.rows[r.ID] = r
		f.order = append(f.order, r.ID)
	}
	return f
}

func (f *fake) Segments(remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	var out []remotelog.SegmentMetadata
	for _, id := range f.order {
		out = append(out, f.rows[id])
	}
	return out, nil
}

func (f *fake) Segment(_ remotelog.TopicPartition, _ int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error) {
	return f.rows[id], nil
}

func (f *fake) UpdateStates(_ remotelog.TopicPartition, rows []remotelog.SegmentMetadata, to remotelog.SegmentState) ([]remotelog.SegmentMetadata, error) {
	out := make([]remotelog.SegmentMetadata, len(rows))
	var starts []int64
	for i, r := range rows {
		r.State = to
		f.rows[r.ID], out[i] = r, r
		starts = append(starts, r.StartOffset)
	}
	f.calls = append(f.calls, fmt.Sprintf("%s %v", to, starts))
	return out, nil
}

func (f *fake) ForgetSegment(_ remotelog.TopicPartition, start int64, id remotelog.SegmentID) error {
	delete(f.rows, id)
	f.calls = append(f.calls, fmt.Sprintf("forget %d", start))
	return nil
}

func (f *fake) DeleteSegment(_ context.Context, m remotelog.SegmentMetadata) error {
	if !f.journaled[m.ID] && f.rows[m.ID].State != remotelog.DeleteSegmentStarted {
		return fmt.Errorf("copy %d deleted in state %s", m.StartOffset, f.rows[m.ID].State)
	}
	f.calls = append(f.calls, fmt.Sprintf("delete %d", m.StartOffset))
	if f.failDel[m.ID] {
		return errBucket
	}
	return nil
}

func (f *fake) AbortUploads(_ context.Context, _ remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) (int, error) {
	f.calls = append(f.calls, fmt.Sprintf("abort %d copies", len(ids)))
	if f.failAbort {
		return 0, errBucket
	}
	return len(ids), nil
}

func (f *fake) AbortUploadsOf(_ context.Context, m remotelog.SegmentMetadata) (int, error) {
	f.calls = append(f.calls, fmt.Sprintf("abort of %d", m.StartOffset))
	if f.failAbort {
		return 0, errBucket
	}
	return 0, nil
}

func (f *fake) CheckFence(context.Context, remotelog.TopicPartition, string, int32) error {
	if f.fenced {
		return rsm.ErrFenced
	}
	return nil
}

var tp = remotelog.TopicPartition{Topic: "t"}

func row(start int64, state remotelog.SegmentState) remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: start, EndOffset: start, State: state}
}

// deleterOf returns a Deleter over f that counts requests, deleted copies
// and sweep requests in the returned counters.
func deleterOf(f *fake) (*Deleter, *[3]int) {
	var n [3]int
	return &Deleter{Store: f, Bucket: f, Log: slog.New(slog.DiscardHandler),
		CheckCopy: func(context.Context, remotelog.SegmentMetadata) error { return nil },
		Counted:   func(remotelog.TopicPartition, error) { n[0]++ },
		Deleted:   func(k int) { n[1] += k },
		NeedSweep: func(remotelog.TopicPartition) { n[2]++ }}, &n
}

// TestGroup: STARTED for the group in one write before any object goes,
// then each copy's objects, then FINISHED in one write for those gone; a
// copy whose objects failed to go stays STARTED, and the others finish.
func TestGroup(t *testing.T) {
	a, b, c := row(0, remotelog.CopySegmentFinished), row(1, remotelog.DeleteSegmentStarted), row(2, remotelog.CopySegmentFinished)
	f := newFake(a, b, c)
	f.failDel[c.ID] = true
	d, n := deleterOf(f)
	ids, err := d.Group(context.Background(), tp, []remotelog.SegmentMetadata{a, b, c}, false)
	if !errors.Is(err, errBucket) {
		t.Fatalf("err %v", err)
	}
	want := []string{"DELETE_SEGMENT_STARTED [0 2]", "delete 0", "delete 1", "delete 2", "DELETE_SEGMENT_FINISHED [0 1]"}
	if !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("calls %q, want %q", f.calls, want)
	}
	if !reflect.DeepEqual(ids, []remotelog.SegmentID{a.ID, b.ID}) || f.rows[c.ID].State != remotelog.DeleteSegmentStarted {
		t.Fatalf("finished %v; the failed copy is %s", ids, f.rows[c.ID].State)
	}
	if *n != [3]int{3, 2, 0} {
		t.Fatalf("requests, deleted, sweeps %v", *n)
	}
}

// TestDiscard: a failed copy's uploads are aborted by exact key before
// its row finishes; when that fails the row stays STARTED.
func TestDiscard(t *testing.T) {
	for _, fail := range []bool{false, true} {
		a := row(0, remotelog.CopySegmentStarted)
		f := newFake(a)
		f.failAbort = fail
		d, _ := deleterOf(f)
		err := d.Discard(context.Background(), a)
		want := []string{"DELETE_SEGMENT_STARTED [0]", "delete 0", "abort of 0", "DELETE_SEGMENT_FINISHED [0]"}
		if fail {
			want = want[:3]
		}
		if !reflect.DeepEqual(f.calls, want) || (err != nil) != fail {
			t.Fatalf("abort fails %t: calls %q, err %v", fail, f.calls, err)
		}
	}
}

// TestDeleteAll: rows go Batch at a time, two writes a group, and a group
// that fails does not stop the next.
func TestDeleteAll(t *testing.T) {
	var rows []remotelog.SegmentMetadata
	for i := int64(0); i < 2*Batch+1; i++ {
		rows = append(rows, row(i, remotelog.CopySegmentFinished))
	}
	f := newFake(rows...)
	f.failDel[rows[0].ID] = true
	d, _ := deleterOf(f)
	gone, err := d.DeleteAll(context.Background(), tp, rows, false)
	if !errors.Is(err, errBucket) || len(gone) != 2*Batch || gone[rows[0].ID] {
		t.Fatalf("%d gone, err %v", len(gone), err)
	}
	writes := 0
	for _, c := range f.calls {
		if c[0] == 'D' {
			writes++
		}
	}
	if writes != 6 {
		t.Fatalf("%d writes for 3 groups", writes)
	}
}

// TestCleanupUnfinished: rows left STARTED are deleted (uploads aborted
// by exact key); a copy fenced by a newer leader is forgotten, its objects
// left; finished rows stay.
func TestCleanupUnfinished(t *testing.T) {
	epoch := int32(3)
	copying, deleting, done, fencedCopy := row(0, remotelog.CopySegmentStarted), row(1, remotelog.DeleteSegmentStarted),
		row(2, remotelog.CopySegmentFinished), row(3, remotelog.CopySegmentStarted)
	fencedCopy.CopyLeaderEpoch = &epoch
	for _, fenced := range []bool{false, true} {
		f := newFake(copying, deleting, done, fencedCopy)
		f.fenced = fenced
		d, _ := deleterOf(f)
		if err := d.CleanupUnfinished(context.Background(), tp); err != nil {
			t.Fatal(err)
		}
		want := []string{"DELETE_SEGMENT_STARTED [0 3]", "delete 0", "abort of 0", "delete 1", "abort of 1", "delete 3", "abort of 3", "DELETE_SEGMENT_FINISHED [0 1 3]"}
		if fenced {
			want = []string{"forget 3", "DELETE_SEGMENT_STARTED [0]", "delete 0", "abort of 0", "delete 1", "abort of 1", "DELETE_SEGMENT_FINISHED [0 1]"}
		}
		if !reflect.DeepEqual(f.calls, want) {
			t.Fatalf("fenced %t: calls %q, want %q", fenced, f.calls, want)
		}
	}
}

// TestAbortUploads: one listing for the deleted copies, none for no
// copies; a failure asks for a sweep.
func TestAbortUploads(t *testing.T) {
	f := newFake()
	d, n := deleterOf(f)
	if err := d.AbortUploads(context.Background(), tp, nil); err != nil || len(f.calls) != 0 {
		t.Fatalf("no copies: %v %q", err, f.calls)
	}
	ids := map[remotelog.SegmentID]bool{remotelog.NewSegmentID(): true, remotelog.NewSegmentID(): true}
	if err := d.AbortUploads(context.Background(), tp, ids); err != nil || n[2] != 0 {
		t.Fatalf("err %v, sweeps %d", err, n[2])
	}
	f.failAbort = true
	if err := d.AbortUploads(context.Background(), tp, ids); !errors.Is(err, errBucket) || n[2] != 1 {
		t.Fatalf("err %v, sweeps %d", err, n[2])
	}
}

// TestDeleteObjects: the objects of copies a journal names go without a
// row of theirs, and no row changes; each request is counted as the
// given partition's, and only a copy whose objects went counts as deleted.
func TestDeleteObjects(t *testing.T) {
	a, b := row(0, remotelog.CopySegmentFinished), row(10, remotelog.CopySegmentFinished)
	f := newFake()
	f.journaled = map[remotelog.SegmentID]bool{a.ID: true, b.ID: true}
	f.failDel[b.ID] = true
	d, n := deleterOf(f)
	var counted []remotelog.TopicPartition
	d.Counted = func(p remotelog.TopicPartition, _ error) { counted = append(counted, p); n[0]++ }
	other := remotelog.TopicPartition{Topic: "t", Partition: 1}
	if err := d.DeleteObjects(context.Background(), other, a); err != nil {
		t.Fatalf("delete a: %v", err)
	}
	if err := d.DeleteObjects(context.Background(), tp, b); !errors.Is(err, errBucket) {
		t.Fatalf("delete b: %v, want %v", err, errBucket)
	}
	if want := []string{"delete 0", "delete 10"}; !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("calls %q, want %q", f.calls, want)
	}
	if want := []remotelog.TopicPartition{other, tp}; !reflect.DeepEqual(counted, want) {
		t.Fatalf("counted as %v, want %v", counted, want)
	}
	if n[0] != 2 || n[1] != 1 || n[2] != 0 {
		t.Fatalf("requests %d, deleted %d, sweeps %d; want 2, 1, 0", n[0], n[1], n[2])
	}
}

// TestProofPresent: the proof holds only when its check in the bucket
// answers and it is still finished and undamaged afterwards.
func TestProofPresent(t *testing.T) {
	by := row(0, remotelog.CopySegmentFinished)
	for _, tc := range []struct {
		name    string
		check   error
		damaged string
		state   remotelog.SegmentState
		want    bool
	}{
		{"present", nil, "", remotelog.CopySegmentFinished, true},
		{"the check fails", errBucket, "", remotelog.CopySegmentFinished, false},
		{"marked damaged by the check", nil, "missing .log", remotelog.CopySegmentFinished, false},
		{"deleted meanwhile", nil, "", remotelog.DeleteSegmentStarted, false},
	} {
		f := newFake(by)
		d, _ := deleterOf(f)
		d.CheckCopy = func(_ context.Context, m remotelog.SegmentMetadata) error {
			r := f.rows[m.ID]
			r.Damaged, r.State = tc.damaged, tc.state
			f.rows[m.ID] = r
			return tc.check
		}
		ok, err := d.ProofPresent(context.Background(), by)
		if ok != tc.want || (err != nil) != (tc.check != nil) {
			t.Errorf("%s: %t, %v", tc.name, ok, err)
		}
	}
}

// TestDeleteSuperseded: a superseded copy goes only once the copy that
// supersedes it is checked present, each such copy checked once; a check
// that fails keeps the copies it would prove and is returned.
func TestDeleteSuperseded(t *testing.T) {
	a, b, c := row(0, remotelog.CopySegmentFinished), row(1, remotelog.CopySegmentFinished), row(2, remotelog.CopySegmentFinished)
	good, lost, broken := row(10, remotelog.CopySegmentFinished), row(11, remotelog.CopySegmentFinished), row(12, remotelog.CopySegmentFinished)
	d2 := row(3, remotelog.CopySegmentFinished)
	f := newFake(a, b, c, d2, good, lost, broken)
	d, _ := deleterOf(f)
	checked := map[int64]int{}
	d.CheckCopy = func(_ context.Context, m remotelog.SegmentMetadata) error {
		checked[m.StartOffset]++
		switch m.StartOffset {
		case lost.StartOffset:
			r := f.rows[m.ID]
			r.Damaged = "missing .log"
			f.rows[m.ID] = r
		case broken.StartOffset:
			return errBucket
		}
		return nil
	}
	gone, err := d.DeleteSuperseded(context.Background(), tp, []retention.SupersededCopy{{Copy: a, By: good}, {Copy: b, By: lost},
		{Copy: c, By: good}, {Copy: d2, By: broken}})
	if !errors.Is(err, errBucket) {
		t.Fatalf("err %v", err)
	}
	if len(gone) != 2 || !gone[a.ID] || !gone[c.ID] {
		t.Fatalf("gone %v, want the two copies of the present proof", gone)
	}
	if want := map[int64]int{10: 1, 11: 1, 12: 1}; !reflect.DeepEqual(checked, want) {
		t.Fatalf("checks %v, want %v", checked, want)
	}
	if want := []string{"DELETE_SEGMENT_STARTED [0 2]", "delete 0", "delete 2", "DELETE_SEGMENT_FINISHED [0 2]"}; !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("calls %q, want %q", f.calls, want)
	}
}
