package remoteread

import "testing"

// The tracker's rings: ends of reads that continued nothing fill the
// fresh ring and push out only its own oldest ends, never a sequential
// chain's; an end overwritten by a newer entry for the same position is
// not deleted when the ring forgets the older one.
func TestSeqTrackerRings(t *testing.T) {
	tr := newSeqTracker()
	chain := &readAhead{hops: 1}
	tr.ended(seqPos{off: -1}, chain, 1)
	tr.ended(seqPos{off: 0}, &readAhead{}, 0)
	again := &readAhead{}
	tr.ended(seqPos{off: 0}, again, 0) // the same end, newer
	for i := int64(1); i < freshSize-1; i++ {
		tr.ended(seqPos{off: i}, &readAhead{}, 0)
	}
	// The ring is full; the next end overwrites the oldest, pos 0's first
	// entry, which must leave pos 0's newer entry alone.
	tr.ended(seqPos{off: freshSize}, &readAhead{}, 0)
	if got := tr.take(seqPos{off: 0}); got != again {
		t.Fatalf("pos 0: got %p, want the newer entry %p", got, again)
	}
	for i := int64(freshSize + 1); i < 4*freshSize; i++ {
		tr.ended(seqPos{off: i}, &readAhead{}, 0)
	}
	if got := tr.take(seqPos{off: -1}); got != chain {
		t.Fatalf("a sequential chain's end was pushed out by %d fresh ends", 4*freshSize)
	}
	if got := tr.take(seqPos{off: -1}); got != nil {
		t.Fatal("an end taken twice")
	}
	if got := tr.take(seqPos{off: 5}); got != nil {
		t.Fatal("the fresh ring kept more than its size")
	}
	if got := tr.take(seqPos{off: 4*freshSize - 1}); got == nil {
		t.Fatal("the newest fresh end was forgotten")
	}
}
