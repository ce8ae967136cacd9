package rlmm

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/tmpfs"
)

// Each Pebble instance runs about six goroutines (WAL writer, cleaner,
// cache shards, compaction granter) and parks the commits of its failed
// writes; an outage used to leave all of them behind. After outages
// outages the goroutine count is back within leakSlack of where it
// started: one instance left behind per outage would add about 6 x
// outages.
const (
	outages   = 5
	leakSlack = 3
)

// Repeated outages of the metadata dir on a real tmpfs (full, then space
// back), with reads under way throughout: each recovery retires the
// failed Pebble instance, so the goroutine count stays flat; no read
// fails or sees a closed instance, and every acknowledged row survives.
func TestOutagesReleaseInstances(t *testing.T) {
	mnt := tmpfs.Mount(t, "16m")
	s, err := Open(Config{Dir: filepath.Join(mnt, "db"), MinFreeBytes: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.retryMin = time.Millisecond
	if err := s.AddSegment(seg(0, 9)); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	before := runtime.NumGoroutine()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	var readMu sync.Mutex
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err1 := s.Segments(tp)
				_, _, _, err2 := s.Snapshot(tp)
				_, err3 := s.Deletions(nil)
				if err := errors.Join(err1, err2, err3); err != nil {
					readMu.Lock()
					readErr = err
					readMu.Unlock()
					return
				}
			}
		}()
	}
	var acked []remotelog.SegmentMetadata
	next := int64(10)
	for round := 0; round < outages; round++ {
		filler := tmpfs.Fill(t, mnt)
		var err error
		for i := 0; err == nil && i < 100000; i++ {
			m := seg(next, next+9)
			next += 10
			if err = s.AddSegment(m); err == nil {
				acked = append(acked, m)
			}
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("round %d: writes on a full tmpfs: %v", round, err)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		waitHealthy(t, s)
		m := seg(next, next+9)
		next += 10
		if err := s.AddSegment(m); err != nil {
			t.Fatalf("round %d: write after recovery: %v", round, err)
		}
		acked = append(acked, m)
	}
	close(stop)
	wg.Wait()
	if readErr != nil {
		t.Fatalf("a read during the outages failed: %v", readErr)
	}
	// The last retirement may still be closing its instance.
	waitFor(t, "the goroutines of the failed instances to end", func() bool { return runtime.NumGoroutine() <= before+leakSlack })
	rows, err := s.Segments(tp)
	if err != nil {
		t.Fatal(err)
	}
	have := map[remotelog.SegmentID]bool{}
	for _, r := range rows {
		have[r.ID] = true
	}
	for _, m := range acked {
		if !have[m.ID] {
			t.Fatalf("acknowledged row %d-%d lost", m.StartOffset, m.EndOffset)
		}
	}
}
