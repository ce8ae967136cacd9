package compact

import (
	"fmt"
	"testing"
)

// TestKeepDeletes checks that a cleaning with KeepDeletes (one that does
// not start at the log start) keeps tombstones and transaction markers
// past their delete horizon, sets the horizon where none is, and still
// drops superseded records; the same cleaning without it drops them.
func TestKeepDeletes(t *testing.T) {
	const pid = 9
	in := [][]byte{
		mk(t, 0, nil, rec("a", "1", 100), rec("b", "1", 100)),
		mk(t, 2, nil, rec("a", tomb, 200), rec("b", "2", 201)),
		marker(t, 4, pid, 1, false), // its transaction's batches lie before the cleaning
	}
	first, _ := pass(t, in, 0, Options{NowMs: 1000, DeleteRetentionMs: 100, KeepDeletes: true})
	if got, want := fmt.Sprint(flat(t, first)), "[2:a=<nil> 3:b=2]"; got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
	if len(first) != 2 {
		t.Fatalf("%d batches kept, want the tombstone's and the marker", len(first))
	}
	for i, e := range first {
		if h, ok := DeleteHorizon(header(t, e)); !ok || h != 1100 {
			t.Fatalf("batch %d: delete horizon %d %v, want 1100 set", i, h, ok)
		}
	}
	out, fd := dirty(t, first, "z")
	kept, _ := pass(t, out, fd, Options{NowMs: 5000, DeleteRetentionMs: 100, KeepDeletes: true})
	if got, want := fmt.Sprint(flat(t, kept)), "[2:a=<nil> 3:b=2 5:z=1]"; got != want || len(kept) != 3 {
		t.Fatalf("past the horizon with KeepDeletes kept %s in %d batches, want %s in 3", got, len(kept), want)
	}
	dropped, _ := pass(t, out, fd, Options{NowMs: 5000, DeleteRetentionMs: 100})
	if got, want := fmt.Sprint(flat(t, dropped)), "[3:b=2 5:z=1]"; got != want || len(dropped) != 2 {
		t.Fatalf("past the horizon without KeepDeletes kept %s in %d batches, want %s in 2", got, len(dropped), want)
	}
}
