package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// watchSIGHUP keeps SIGHUP, whose default action ends the process, from
// ending a long-running subcommand: until stop is called, each SIGHUP is
// handed to onSIGHUP instead.
func watchSIGHUP(stderr io.Writer) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				onSIGHUP(stderr)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// onSIGHUP is what a long-running subcommand does on SIGHUP: it says the
// signal arrived and changed nothing. A subcommand that reloads its
// configuration on SIGHUP replaces this.
func onSIGHUP(stderr io.Writer) {
	fmt.Fprintln(stderr, "tierd: SIGHUP received: nothing to reload here; going on")
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
