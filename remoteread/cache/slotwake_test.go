package cache

import (
	"context"
	"testing"
	"time"
)

// TestSlotWakesWaiterAtItsBytes: a waiter for bytes further on is not
// woken by each read of the load before them, only once its bytes are in;
// a second waiter for nearer bytes lowers the mark and both are served.
func TestSlotWakesWaiterAtItsBytes(t *testing.T) {
	s := &slot{from: 0, to: 1000, buf: make([]byte, 1000)}
	far := make(chan error, 1)
	go func() { _, err := s.wait(context.Background(), 900, 1000); far <- err }()
	waitFor := func(cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("condition not reached")
			}
		}
	}
	registered := func(need int) func() bool {
		return func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.wake != nil && s.need == need }
	}
	waitFor(registered(1000))
	w := s.wake
	s.progress(100)
	s.progress(500)
	select {
	case <-w:
		t.Fatal("a read of 500 bytes woke the waiter for byte 1000")
	default:
	}
	near := make(chan error, 1)
	go func() { _, err := s.wait(context.Background(), 0, 600); near <- err }()
	waitFor(registered(600))
	s.progress(700)
	if err := <-near; err != nil {
		t.Fatal(err)
	}
	waitFor(registered(1000)) // the far waiter, woken with the near one, sleeps again
	s.end(nil)
	if err := <-far; err != nil {
		t.Fatal(err)
	}
}
