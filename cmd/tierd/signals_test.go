package main

import (
	"bytes"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// SIGHUP to a long-running subcommand reaches onSIGHUP (that it does not
// end the process is the handler's doing in tierd; in this test binary
// TestMain also catches SIGHUP, so the test checks that onSIGHUP ran).
func TestSIGHUPDoesNotKill(t *testing.T) {
	var out syncBuffer
	stop := watchSIGHUP(&out)
	defer stop()
	for i := 0; i < 2; i++ {
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "SIGHUP received") {
		if time.Now().After(deadline) {
			t.Fatal("onSIGHUP never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
