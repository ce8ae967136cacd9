package listener

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchResponseMemory: a Fetch that cannot reserve its share of
// fetch.response.memory.bytes within max_wait_ms answers with each
// partition's offsets and no records; one that gets it after a wait
// answers records; every reservation is given back once the response is
// written.
func TestFetchResponseMemory(t *testing.T) {
	l, size := budgetLog(t)
	ts := startServer(t, l, func(c *Config) { c.FetchResponseMemoryBytes = 1 << 20 })
	rc := dialRaw(t, ts.addr, "memory")
	all := map[int32]int64{0: 0, 1: 0, 2: 0}
	req := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, offsets: all, maxWait: 20}
	batches := func(resp *kmsg.FetchResponse) (n int) {
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.HighWatermark != 3 || p.LogStartOffset != 0 {
				t.Fatalf("partition %d: %+v", p.Partition, p)
			}
			n += batchesIn(t, p.RecordBatches)
		}
		return n
	}
	mem := ts.srv.fetchMem
	held := func() float64 { return testutil.ToFloat64(ts.srv.m.fetchMem) }

	// Free memory: all 9 batches fit in half the budget.
	if n := batches(rc.roundTrip(req.build()).(*kmsg.FetchResponse)); n != 9 {
		t.Fatalf("with the memory free: %d batches, want 9 (of %d bytes)", n, size)
	}
	// The server gives it back once its write returns, which may be a
	// moment after the client has read the response.
	waitFor(t, "the reservation given back, the budget whole", func() bool { return held() == 0 && mem.TryAcquire(1<<20) })

	// Memory taken (the test holds it all): no records, offsets still.
	if n := batches(rc.roundTrip(req.build()).(*kmsg.FetchResponse)); n != 0 {
		t.Fatalf("with the memory taken: %d batches, want 0", n)
	}
	if d := testutil.ToFloat64(ts.srv.m.fetchMemWaits.WithLabelValues("denied")); d != 1 {
		t.Fatalf("%v denied, want 1", d)
	}

	// Memory given back during the wait: the Fetch gets it and answers.
	go func() {
		waitFor(t, "a Fetch waiting for memory", func() bool { return fetchWaiting(ts) })
		mem.Release(1 << 20)
	}()
	long := req
	long.maxWait = 20000
	if n := batches(rc.roundTrip(long.build()).(*kmsg.FetchResponse)); n != 9 {
		t.Fatalf("after the wait: %d batches, want 9", n)
	}
	if g := testutil.ToFloat64(ts.srv.m.fetchMemWaits.WithLabelValues("granted")); g != 1 {
		t.Fatalf("%v granted, want 1", g)
	}
	waitFor(t, "the reservation given back", func() bool { return held() == 0 })
	if !mem.TryAcquire(1 << 20) {
		t.Fatal("the budget is not whole after the responses")
	}
	mem.Release(1 << 20)
}

// fetchWaiting reports whether a Fetch waits for memory: a waiter shows
// as a failed TryAcquire of nothing (semaphore.Weighted refuses even 0
// while others wait; taking 0 bytes otherwise changes nothing).
func fetchWaiting(ts *testServer) bool { return !ts.srv.fetchMem.TryAcquire(0) }

// TestFetchMemoryShrinksAndGrows: a Fetch keeps twice the records its
// round read, not twice what it may return; a long poll's next round takes
// more again only when it is free; all goes back with the response.
func TestFetchMemoryShrinksAndGrows(t *testing.T) {
	l, _ := budgetLog(t)
	ts := startServer(t, l, func(c *Config) { c.FetchResponseMemoryBytes = 1 << 20 })
	s := ts.srv
	c := &conn{s: s}
	held := func() float64 { return testutil.ToFloat64(s.m.fetchMem) }
	if limit, ok, _ := s.reserveFetch(context.Background(), c, 200<<10, 0); !ok || limit != 200<<10 || c.fetchHeld != 400<<10 {
		t.Fatalf("reserve 200 KiB of records: limit %d ok %v held %d", limit, ok, c.fetchHeld)
	}
	if limit, ok, _ := s.reserveFetch(context.Background(), &conn{s: s}, 1<<20, 0); ok || limit != 0 {
		t.Fatalf("a second Fetch wanting the whole budget without waiting: limit %d ok %v", limit, ok)
	}
	s.shrinkFetch(c, 2*10<<10) // the round read 10 KiB
	if c.fetchHeld != 20<<10 || held() != 20<<10 {
		t.Fatalf("after a round of 10 KiB: %d held (gauge %v)", c.fetchHeld, held())
	}
	other := &conn{s: s}
	if _, ok, _ := s.reserveFetch(context.Background(), other, 500<<10, 0); !ok {
		t.Fatal("the shrunk Fetch still keeps others out")
	}
	if _, ok := s.growFetch(c, 200<<10); ok {
		t.Fatal("a long poll's round took memory another Fetch holds")
	}
	other.releaseFetch()
	if limit, ok := s.growFetch(c, 200<<10); !ok || limit != 200<<10 || c.fetchHeld != 400<<10 {
		t.Fatalf("grow back: limit %d ok %v held %d", limit, ok, c.fetchHeld)
	}
	c.releaseFetch()
	if held() != 0 || !s.fetchMem.TryAcquire(1<<20) {
		t.Fatalf("after release: gauge %v, or the budget not whole", held())
	}
	s.fetchMem.Release(1 << 20)
	// A Fetch capped at the whole budget returns half of it in records.
	if limit, ok, err := s.reserveFetch(context.Background(), c, 4<<20, time.Second); !ok || err != nil || limit != 512<<10 {
		t.Fatalf("a Fetch wanting more than the budget: limit %d ok %v", limit, ok)
	}
	c.releaseFetch()
}

// memoryWaitReq is a Fetch whose max_wait_ms is far beyond the tests'
// guard: only a wait that ends early lets a test pass.
var memoryWaitReq = fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, offsets: map[int32]int64{0: 0}, maxWait: 3600000}

// TestFetchMemoryWaitClientGone: a Fetch waiting for
// fetch.response.memory.bytes (held by the test throughout) stops waiting
// when its client closes the connection, which is then closed and
// dropped, as a long poll's is.
func TestFetchMemoryWaitClientGone(t *testing.T) {
	l, _ := budgetLog(t)
	ts := startServer(t, l, func(c *Config) { c.FetchResponseMemoryBytes = 1 << 20 })
	mem := ts.srv.fetchMem
	if !mem.TryAcquire(1 << 20) {
		t.Fatal("the budget is not whole")
	}
	defer mem.Release(1 << 20)
	req := memoryWaitReq
	rc := dialRaw(t, ts.addr, "gone")
	rc.write(rc.frame(req.build()))
	waitFor(t, "a Fetch waiting for memory", func() bool { return fetchWaiting(ts) })
	rc.c.Close()
	waitFor(t, "the connection of the client that left dropped", func() bool {
		return ts.closed(reasonClient) == 1 && testutil.ToFloat64(ts.srv.m.conns) == 0
	})
	if fetchWaiting(ts) {
		t.Fatal("the Fetch of the client that left still waits for memory")
	}
}

// TestFetchMemoryWaitShutdown: a stopping listener answers a Fetch
// waiting for fetch.response.memory.bytes at once, without records, as
// it answers a long poll, and closes.
func TestFetchMemoryWaitShutdown(t *testing.T) {
	l, _ := budgetLog(t)
	req := memoryWaitReq
	cfg := DefaultConfig()
	cfg.FetchResponseMemoryBytes = 1 << 20
	srv, err := New(cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	if !srv.fetchMem.TryAcquire(1 << 20) {
		t.Fatal("the budget is not whole")
	}
	defer srv.fetchMem.Release(1 << 20)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	rc2 := dialRaw(t, lis.Addr().String(), "stop")
	rc2.write(rc2.frame(req.build()))
	waitFor(t, "a Fetch waiting for memory", func() bool { return !srv.fetchMem.TryAcquire(0) })
	cancel()
	_, body, err := rc2.readFrame()
	if err != nil {
		t.Fatalf("no answer at shutdown: %v", err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	if err := resp.ReadFrom(skipTags(body)); err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 3 {
		t.Fatalf("answer at shutdown: %+v", p)
	}
	rc2.expectClosed()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
