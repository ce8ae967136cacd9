package listener

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file bounds the memory Fetch responses hold, for all connections
// together (fetch.response.memory.bytes, Config.FetchResponseMemoryBytes).

// fetchWant is the most record bytes req may return, bytes: its max_bytes
// capped by fetch.max.bytes and by the sum of its partitions'
// partition_max_bytes (the first batch aside, which may exceed both).
func (s *Server) fetchWant(req *kmsg.FetchRequest, parts []*fetchPart) int64 {
	var sum int64
	for _, p := range parts {
		sum += int64(max(p.maxBytes, 0))
	}
	return max(min(int64(req.MaxBytes), int64(s.cfg.FetchMaxBytes), sum), 0)
}

// reserveFetch takes from the listener's Fetch memory twice the record
// bytes a Fetch wants (the records, and the response buffer they are
// encoded into), at most the whole budget, waiting up to wait (a Fetch's
// max_wait_ms; no wait when it is 0) and no longer than ctx. As a long
// poll, the wait ends early when the listener stops (the Fetch answers
// without records) or the client closes its connection (checked every
// fetch.poll.interval.ms; the error, a *closeErr, says nobody is left to
// answer). The bytes stay with c until its response is written
// (conn.releaseFetch). It returns the record bytes the Fetch may return,
// and false when the memory did not come in time: the Fetch then answers
// without records.
func (s *Server) reserveFetch(ctx context.Context, c *conn, want int64, wait time.Duration) (int64, bool, error) {
	n := min(2*want, s.cfg.FetchResponseMemoryBytes)
	if n == 0 {
		return 0, true, nil
	}
	if !s.fetchMem.TryAcquire(n) {
		if wait <= 0 {
			s.m.fetchMemWaits.WithLabelValues("denied").Inc()
			return 0, false, nil
		}
		gone, err := s.acquireFetch(ctx, c, n, wait)
		if gone {
			return 0, false, &closeErr{reason: reasonClient, err: fmt.Errorf("%w while a Fetch waited for memory", errClientClosed)}
		}
		if err != nil {
			s.m.fetchMemWaits.WithLabelValues("denied").Inc()
			return 0, false, nil
		}
		s.m.fetchMemWaits.WithLabelValues("granted").Inc()
	}
	c.fetchHeld += n
	s.m.fetchMem.Add(float64(n))
	return n / 2, true, nil
}

// acquireFetch waits up to wait for n bytes of the Fetch memory, until
// ctx ends, the listener stops, or the client closes its connection
// (gone true). err is nil when the bytes were taken.
func (s *Server) acquireFetch(ctx context.Context, c *conn, n int64, wait time.Duration) (gone bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(s.cfg.pollInterval())
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-c.stopping:
				cancel()
				return
			case <-tick.C:
				if c.peerClosed() {
					gone = true
					cancel()
					return
				}
			}
		}
	}()
	err = s.fetchMem.Acquire(wctx, n)
	cancel()
	<-watched
	if gone && err == nil {
		s.fetchMem.Release(n) // taken as the client left: nobody to answer
	}
	return gone, err
}

// shrinkFetch gives back what c holds beyond keep bytes: once a round
// has read its records, a Fetch holds twice those, not twice what it may
// return, so that a long poll waiting for data holds little.
func (s *Server) shrinkFetch(c *conn, keep int64) {
	if extra := c.fetchHeld - max(keep, 0); extra > 0 {
		s.fetchMem.Release(extra)
		s.m.fetchMem.Sub(float64(extra))
		c.fetchHeld -= extra
	}
}

// growFetch takes back, without waiting, what a long poll's next round
// needs (twice want, at most the budget) beyond what c holds, and returns
// the record bytes the round may return; false when the budget is taken
// (the poll waits for the next tick).
func (s *Server) growFetch(c *conn, want int64) (int64, bool) {
	n := min(2*want, s.cfg.FetchResponseMemoryBytes)
	if n > c.fetchHeld {
		if !s.fetchMem.TryAcquire(n - c.fetchHeld) {
			return 0, false
		}
		s.m.fetchMem.Add(float64(n - c.fetchHeld))
		c.fetchHeld = n
	}
	return n / 2, true
}

// releaseFetch gives back the Fetch memory c holds.
func (c *conn) releaseFetch() { c.s.shrinkFetch(c, 0) }
