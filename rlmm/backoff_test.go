package rlmm

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tierd/tierd/internal/testutil/tmpfs"
)

// A dir with room for the probe and for opening Pebble but not for its
// WAL's writes: every reopen succeeds and the next write fails. The
// backoff grows from outage to outage instead of starting again at
// retryMin after each reopen (which made a 250 ms flapping loop).
func TestBackoffGrowsAcrossOutages(t *testing.T) {
	fs := newFaultFS(vfs.NewMem())
	var log logBuf
	reg := prometheus.NewRegistry()
	s, err := Open(Config{Dir: "db", MinFreeBytes: 0}, WithFS(fs), WithLogger(log.logger()), WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.retryMin = time.Millisecond
	fs.walFull.Store(true)
	deadline := time.Now().Add(time.Minute) // a guard against hanging, not a timed assertion
	for testutil.ToFloat64(s.failures) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%v outages in a minute; log:\n%s", testutil.ToFloat64(s.failures), strings.Join(log.lines(), "\n"))
		}
		if err := s.AddSegment(seg(0, 9)); err == nil {
			t.Fatal("a write succeeded with the WAL failing")
		}
		time.Sleep(time.Millisecond)
	}
	re := regexp.MustCompile(`stopped taking writes.* retry_in=(\S+)`)
	var waits []time.Duration
	for _, l := range log.lines() {
		if m := re.FindStringSubmatch(l); m != nil {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				t.Fatal(err)
			}
			waits = append(waits, d)
		}
	}
	if len(waits) < 4 {
		t.Fatalf("%d outage lines: %v", len(waits), waits)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] <= waits[i-1] {
			t.Fatalf("backoff did not grow across outages: %v", waits)
		}
	}
	fs.walFull.Store(false)
	waitHealthy(t, s)
	for err := s.AddSegment(seg(0, 9)); err != nil; err = s.AddSegment(seg(0, 9)) {
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("write after the WAL took writes again: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// With min_free_bytes 0 on a tmpfs left with too little room for Pebble's
// WAL, the store stops taking writes once and stays stopped (the probe
// reserves what a WAL needs), rather than reopening and failing again
// pass after pass; it takes writes again once space returns.
func TestTmpfsNearlyFullNoFlapping(t *testing.T) {
	mnt := tmpfs.Mount(t, "16m")
	var log logBuf
	s, err := Open(Config{Dir: filepath.Join(mnt, "db"), MinFreeBytes: 0}, WithLogger(log.logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.retryMin = time.Millisecond
	if err := s.AddSegment(seg(0, 9)); err != nil {
		t.Fatal(err)
	}
	filler := tmpfs.Fill(t, mnt)
	st, err := os.Stat(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, st.Size()-256<<10); err != nil { // 256 KiB free: the probe's 4 KiB fits
		t.Fatal(err)
	}
	// Write until the WAL preallocated before the fill is used up and the
	// next one cannot be preallocated, then go on writing as passes would.
	i := int64(1)
	for ; i < 100000 && s.AddSegment(seg(i*10, i*10+9)) == nil; i++ {
	}
	if i == 100000 {
		t.Skip("Pebble took every write: no WAL preallocation on this kernel's tmpfs")
	}
	// Old behaviour: the 4 KiB probe passed, Pebble reopened into the
	// space the dead WAL gave back, and failed again once that was used.
	for j := int64(0); j < 100000 && testutil.ToFloat64(s.failures) < 2; j++ {
		s.AddSegment(seg((i+j)*10, (i+j)*10+9))
	}
	if n := testutil.ToFloat64(s.failures); n != 1 {
		t.Fatalf("the store stopped %v times, want once (it reopened and failed again):\n%s", n, strings.Join(log.lines(), "\n"))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, s)
	if err := s.AddSegment(seg(1<<40, 1<<40+9)); err != nil {
		t.Fatalf("write after space returned: %v", err)
	}
}
