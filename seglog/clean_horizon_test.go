package seglog

import (
	"testing"
	"time"
)

// TestCleanWhenDeleteHorizonPassed: with nothing dirty, a pass still runs
// once the latest delete horizon the last pass set has passed, and drops
// the tombstone it covers (Kafka's LogCleanerManager cleans logs whose
// latest delete horizon expired, KIP-534); before the horizon, and after
// that pass, Clean finds nothing to do.
func TestCleanWhenDeleteHorizonPassed(t *testing.T) {
	clock := newFakeClock()
	l := mustOpen(t, partitionDir(t, "horizon-0"), compactConfig(), WithClock(clock.Now))
	defer l.Close()
	appendKV(t, l, "a", []byte("1"))
	appendKV(t, l, "b", []byte("1"))
	appendKV(t, l, "a", nil) // tombstone
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, "c", []byte("1")) // the active segment
	st, err := l.Clean()
	if err != nil || !st.Cleaned {
		t.Fatalf("first pass: %+v %v", st, err)
	}
	if want := clock.Now().UnixMilli() + compactConfig().DeleteRetentionMs; st.LatestDeleteHorizonMs != want {
		t.Fatalf("latest delete horizon %d, want %d", st.LatestDeleteHorizonMs, want)
	}
	if n := tombstones(readRecords(t, l)); n != 1 {
		t.Fatalf("after the first pass: %d tombstones, want 1", n)
	}
	clock.Advance(50 * time.Millisecond)
	if st, err := l.Clean(); err != nil || st.Cleaned || st.Reason != "nothing dirty to clean" {
		t.Fatalf("before the horizon: %+v %v", st, err)
	}
	clock.Advance(60 * time.Millisecond)
	st, err = l.Clean()
	if err != nil || !st.Cleaned || st.Reason != "delete horizon passed" || st.LatestDeleteHorizonMs != 0 {
		t.Fatalf("after the horizon: %+v %v", st, err)
	}
	recs := readRecords(t, l)
	if n := tombstones(recs); n != 0 || len(recs) != 2 {
		t.Fatalf("after the horizon: %d records, %d tombstones; want b and c, no tombstone", len(recs), n)
	}
	if st, err := l.Clean(); err != nil || st.Cleaned {
		t.Fatalf("a pass after the tombstone went: %+v %v", st, err)
	}
}

func tombstones(recs []Record) int {
	n := 0
	for _, r := range recs {
		if r.Value == nil {
			n++
		}
	}
	return n
}
