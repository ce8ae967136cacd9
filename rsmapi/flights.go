package rsmapi

import (
	"context"
	"errors"
	"sync"

	"github.com/tierd/tierd/internal/remotelog"
)

// errEndedByDelete is the cause of a copy ended by a DELETE of the same
// segment id.
var errEndedByDelete = errors.New("ended by a DELETE of the same copy")

// flights serialises the work on each segment id: copies, deletes and
// the clean-up of failed attempts of one id run one after the other, and
// a DELETE can end the copy that holds the id.
type flights struct {
	mu sync.Mutex
	m  map[remotelog.SegmentID]*flight
}

// flight is one segment id's lock.
type flight struct {
	lock   chan struct{} // holds one token while someone works on the id
	users  int           // holders and waiters; the entry goes at 0
	cancel context.CancelCauseFunc
	copy   bool // the holder is a copy
}

func newFlights() *flights { return &flights{m: map[remotelog.SegmentID]*flight{}} }

func (f *flights) entry(id remotelog.SegmentID) *flight {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.m[id]
	if e == nil {
		e = &flight{lock: make(chan struct{}, 1)}
		f.m[id] = e
	}
	e.users++
	return e
}

func (f *flights) leave(id remotelog.SegmentID, e *flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.users--; e.users == 0 {
		delete(f.m, id)
	}
}

// acquire waits for id's lock until ctx ends. A copy passes its cancel
// function, which a DELETE of the same id calls (endCopy). The returned
// release gives the lock back. Errors: ctx's.
func (f *flights) acquire(ctx context.Context, id remotelog.SegmentID, cancel context.CancelCauseFunc) (release func(), err error) {
	e := f.entry(id)
	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		f.leave(id, e)
		return nil, context.Cause(ctx)
	}
	f.mu.Lock()
	e.cancel, e.copy = cancel, cancel != nil
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		e.cancel, e.copy = nil, false
		f.mu.Unlock()
		<-e.lock
		f.leave(id, e)
	}, nil
}

// tryAcquire takes id's lock only when nobody holds it or waits for it.
func (f *flights) tryAcquire(id remotelog.SegmentID) (release func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m[id] != nil {
		return nil, false
	}
	e := &flight{lock: make(chan struct{}, 1), users: 1}
	e.lock <- struct{}{}
	f.m[id] = e
	return func() {
		<-e.lock
		f.leave(id, e)
	}, true
}

// endCopy ends the copy holding id's lock, if one does.
func (f *flights) endCopy(id remotelog.SegmentID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.m[id]; e != nil && e.copy && e.cancel != nil {
		e.cancel(errEndedByDelete)
		return true
	}
	return false
}

// copying returns the number of copies holding their id's lock.
func (f *flights) copying() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.m {
		if e.copy {
			n++
		}
	}
	return n
}

// waiters returns how many hold or wait for id's lock.
func (f *flights) waiters(id remotelog.SegmentID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.m[id]; e != nil {
		return e.users
	}
	return 0
}
