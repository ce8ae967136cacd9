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

// SIGHUP to a long-running subcommand reaches onSIGHUP and does not end
// the process (this test's process: without the handler it would die).
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
