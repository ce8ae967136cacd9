package rlmm

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/tmpfs"
)

func TestZZLeakExperiment(t *testing.T) {
	mnt := tmpfs.Mount(t, "16m")
	s, err := Open(Config{Dir: filepath.Join(mnt, "db"), MinFreeBytes: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.retryMin = time.Millisecond
	before := runtime.NumGoroutine()
	for round := 0; round < 3; round++ {
		filler := tmpfs.Fill(t, mnt)
		var err error
		for i := int64(0); err == nil && i < 100000; i++ {
			err = s.AddSegment(seg(int64(round)<<32+i*10, int64(round)<<32+i*10+9))
		}
		t.Logf("round %d: %v", round, err)
		os.Remove(filler)
		waitHealthy(t, s)
		time.Sleep(100 * time.Millisecond)
		t.Logf("goroutines %d -> %d", before, runtime.NumGoroutine())
	}
	pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
}
