package seglog

import "testing"

// TestCleanOpenTransactionAfterReopen checks that a transaction left open
// when the log was closed still bounds the cleanable range after a
// reopen: its record may yet be aborted, so it must not supersede the
// committed value of its key.
func TestCleanOpenTransactionAfterReopen(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t, "txnreopen-0")
	cfg := compactConfig()
	l := mustOpen(t, dir, cfg, WithClock(clock.Now))
	appendKV(t, l, "a", []byte("committed"))
	if _, err := l.AppendTransactional(5, 0, Record{Key: []byte("a"), Value: []byte("open")}); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, "b", []byte("x"))
	l.Close()
	l = mustOpen(t, dir, cfg, WithClock(clock.Now))
	defer l.Close()
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, "c", []byte("x"))
	if _, err := l.Clean(); err != nil {
		t.Fatal(err)
	}
	latest, _ := latestByKey(readRecords(t, l))
	recs := readRecords(t, l)
	found := false
	for _, r := range recs {
		found = found || (string(r.Key) == "a" && string(r.Value) == "committed")
	}
	if !found {
		t.Fatalf("the committed value of a is gone, superseded by an open transaction's record (latest %q)", latest["a"])
	}
}
