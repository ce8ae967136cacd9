package rlmm

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Retiring a dead Pebble instance. A write that fails kills the instance
// it went through (see guardFS): its Pebble goroutines park, and the
// store opens a new instance of the directory once it takes writes
// again. The dead instance still holds goroutines (the WAL writer, the
// cleaner, cache shards, the commits it parked) and a few MiB of
// memtables and block cache; retire releases them once the new instance
// is in use:
//
//  1. release: parked writes return an error without running, and so
//     does every later write of the instance, so that closing it never
//     touches a file of the directory (the new instance owns them);
//     commits under way on it end with that error;
//  2. wait until no read uses the instance (Store.read counts them);
//  3. Close it, keeping no error: Close reports the instance's failure
//     (the WAL it cannot flush), which the store already handled.

// read returns the Pebble instance in use for a read, counted until done
// is called, so that a retired instance is closed only after the reads
// that took it. A read taking the instance while it is being replaced
// retries with the new one.
func (s *Store) read() (db *pebble.DB, done func()) {
	for {
		in := s.inst.Load()
		in.readers.Add(1)
		if s.inst.Load() == in {
			return in.db, func() { in.readers.Add(-1) }
		}
		in.readers.Add(-1) // replaced meanwhile: its retirement may not see this read
	}
}

// retired reports whether the instance was released for closing.
func (in *instance) retired() bool {
	select {
	case <-in.release:
		return true
	default:
		return false
	}
}

// unpark releases the instance's parked writes (and later ones) with an
// error, once.
func (in *instance) unpark() { in.releaseOnce.Do(func() { close(in.release) }) }

// retire closes a dead instance that is no longer in use (another one is
// installed, or the store is closing): it releases its writes, waits
// until no read uses it, and closes it. The caller has abandoned it (its
// writes are quiet and its directory lock released).
func (s *Store) retire(in *instance) {
	in.unpark()
	for in.readers.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
	if in.db == nil {
		return
	}
	if err := closeDB(in.db); err != nil {
		s.log.Debug("closed the metadata store's failed Pebble instance", "dir", s.cfg.Dir, "err", err)
	}
}

// closeDB closes db, returning a panic of Pebble's (a second Close, an
// invariant an interrupted write left broken) as an error.
func closeDB(db *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rlmm: close panicked: %v", r)
		}
	}()
	return db.Close()
}
