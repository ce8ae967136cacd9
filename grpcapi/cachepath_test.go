package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm"
)

func checkFetch(t *testing.T, e *env, off int64, maxBytes int32) *tierdpb.FetchResponse {
	t.Helper()
	resp, err := e.fetch(off, maxBytes)
	if err != nil {
		t.Fatalf("fetch %d: %v", off, err)
	}
	checkRecords(t, resp, off)
	return resp
}

// checkRecords checks that a fetch of off answered with the reference
// log's records from off on.
func checkRecords(t *testing.T, resp *tierdpb.FetchResponse, off int64) {
	t.Helper()
	bs := readtest.Batches(t, resp.Records)
	recs, err := batch.Records(resp.Records[:bs[0].Size], nil)
	if err != nil || len(recs) == 0 || recs[0].Offset != off || !bytes.Equal(recs[0].Value, bytes.Repeat([]byte{byte(off)}, 5000)) {
		t.Fatalf("fetch %d: wrong records (%v)", off, err)
	}
}

// A fetch whose chunk and index are cached makes no GET at all, and a
// timestamp lookup after it loads only the time index.
func TestCachedFetchMakesNoGET(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PrefetchBytes = 0
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	checkFetch(t, e, 0, 2<<20)        // segment 0 (about 1 MiB) is one chunk, loaded whole
	time.Sleep(50 * time.Millisecond) // loads touched past the response end finish
	before := e.Bucket.Gets.Load()
	for i := 0; i < 20; i++ {
		checkFetch(t, e, 100+int64(i%5), 20000)
	}
	if n := e.Bucket.Gets.Load() - before; n != 0 {
		t.Fatalf("%d GETs for cached fetches", n)
	}
	r, err := e.api.ListOffsets(context.Background(), &tierdpb.ListOffsetsRequest{Topic: "t", Spec: tierdpb.OffsetSpec_TIMESTAMP, Timestamp: 1_001_000})
	if err != nil || r.Offset != 100 {
		t.Fatalf("ListOffsets: %v %v", r, err)
	}
	if n := e.Bucket.Gets.Load() - before; n != 1 {
		t.Fatalf("%d GETs for a timestamp lookup in cached bytes, want 1 (the time index)", n)
	}
}

// Concurrent fetches of one cold offset make one GET of the .log: the
// GET is held until all 16 fetches have claimed their bytes (each holds a
// Pin while it waits), so that every one of them meets the load in
// flight.
func TestConcurrentColdFetchesOneGET(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PrefetchBytes = 0
	// The fetches wait while the GET is held: no max wait may end them
	// first (UNAVAILABLE), however long a loaded machine takes to start
	// them.
	cfg.MaxWaitMs = 600000
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	checkFetch(t, e, 0, 1) // segment 0 is cached
	// 206 is segment 1's first offset: its offset index is cached, and
	// the start of its .log; offset 300 lies about 470 KB further on, in
	// bytes no load has touched.
	checkFetch(t, e, 206, 1)
	waitPins(t, e.srv, 0) // the answers above let go of their chunks
	gate := make(chan struct{})
	e.Bucket.Gate.Store(&gate)
	before := e.Bucket.LogGets.Load()
	const n = 16
	type answer struct {
		resp *tierdpb.FetchResponse
		err  error
	}
	answers := make(chan answer, n)
	for g := 0; g < n; g++ {
		go func() {
			resp, err := e.fetch(300, 1)
			answers <- answer{resp, err}
		}()
	}
	waitPins(t, e.srv, n) // each fetch has met the load (or started it)
	close(gate)
	for g := 0; g < n; g++ {
		a := <-answers
		if a.err != nil {
			t.Fatalf("fetch 300: %v", a.err)
		}
		checkRecords(t, a.resp, 300)
	}
	if n := e.Bucket.LogGets.Load() - before; n != 1 {
		t.Fatalf("%d .log GETs for 16 concurrent cold fetches of one offset", n)
	}
}

// waitPins waits until the server's cache holds n Pins (reads holding
// their chunks), failing the test after a minute.
func waitPins(t *testing.T, srv *Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for srv.Engine().Cache().Pinned() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads hold chunks, want %d", srv.Engine().Cache().Pinned(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A sequential reader gets chunks loaded ahead of it, across the segment
// boundary: by the time it reaches the next segment, that segment's
// first bytes and offset index are cached, so the reads crossing it load
// nothing themselves (the read-ahead going on past them may).
func TestPrefetchAcrossSegments(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.PrefetchBytes = 256 << 10
	reg := prometheus.NewRegistry()
	e := newEnv(t, cfg, WithRegisterer(reg))
	readtest.ReferenceLog(t, e.Rig)
	fin, _ := e.Store.FinishedSegments(e.TP)
	next := int64(0)
	for next < fin[1].StartOffset-3 {
		next = checkFetch(t, e, next, 5100).NextOffset
	}
	time.Sleep(200 * time.Millisecond) // prefetches land
	demand := func() float64 {
		return readtest.MetricValue(t, reg, "tierd_cache_misses_total") - readtest.MetricValue(t, reg, "tierd_cache_prefetches_total")
	}
	loads, logGets, gets := demand(), e.Bucket.LogGets.Load(), e.Bucket.Gets.Load()
	for next < fin[1].StartOffset+5 {
		next = checkFetch(t, e, next, 5100).NextOffset
	}
	if n := demand() - loads; n != 0 {
		t.Fatalf("%v loads by the reads crossing into the next segment, want 0 (read ahead)", n)
	}
	if n := (e.Bucket.Gets.Load() - gets) - (e.Bucket.LogGets.Load() - logGets); n != 0 {
		t.Fatalf("%d index GETs crossing into the next segment, want 0 (read ahead)", n)
	}
	// A random reader is not prefetched for.
	e2 := newEnv(t, cfg)
	readtest.ReferenceLog(t, e2.Rig)
	checkFetch(t, e2, 300, 1)
	checkFetch(t, e2, 100, 1)
	time.Sleep(100 * time.Millisecond)
	if n := e2.Bucket.LogGets.Load(); n > 4 {
		t.Fatalf("%d .log GETs for two random fetches", n)
	}
}

// A fetch whose first batch does not arrive within remote.fetch.max.wait.ms
// answers UNAVAILABLE; its load goes on and the retry is served from the
// cache without a new GET.
func TestMaxWait(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 100
	cfg.PrefetchBytes = 0
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	// The first offset of the copy holding offset 500: fetching it caches
	// that copy's offset index, so that the held fetch below waits for
	// its .log load, not for the index.
	ls, err := e.api.ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: e.TP.Topic})
	if err != nil {
		t.Fatal(err)
	}
	first := int64(0)
	for _, sg := range ls.Segments {
		if sg.StartOffset <= 500 && 500 <= sg.EndOffset {
			first = sg.StartOffset
		}
	}
	if first == 500 {
		t.Fatal("offset 500 starts its copy: the test needs it inside one")
	}
	checkFetch(t, e, first, 1)
	gate := make(chan struct{})
	e.Bucket.Gate.Store(&gate)
	before := e.Bucket.LogGets.Load()
	start := time.Now()
	_, err = e.fetch(500, 1)
	if status.Code(err) != codes.Unavailable || time.Since(start) > 2*time.Second {
		t.Fatalf("fetch of a held chunk: %v after %s, want UNAVAILABLE after about 100ms", err, time.Since(start))
	}
	close(gate)
	time.Sleep(50 * time.Millisecond)
	checkFetch(t, e, 500, 1)
	if n := e.Bucket.LogGets.Load() - before; n != 1 {
		t.Fatalf("%d .log GETs, want the retry served by the first load", n)
	}
}

// The disk tier serves after a restart, and a corrupted chunk file is
// detected and fetched again: the answer is right either way.
func TestDiskCacheCorruptFile(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PrefetchBytes = 0
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.Cache.DiskDir = t.TempDir()
	e := newEnv(t, cfg)
	dir := readtest.ReferenceLog(t, e.Rig)
	_ = dir
	checkFetch(t, e, 42, 1)
	time.Sleep(100 * time.Millisecond)
	files, _ := filepath.Glob(filepath.Join(cfg.Cache.DiskDir, "*", "*"))
	if len(files) == 0 {
		t.Fatal("no chunk files on disk")
	}
	for _, f := range files { // flip a byte in the middle of every file
		raw, _ := os.ReadFile(f)
		raw[len(raw)/2] ^= 0xff
		os.WriteFile(f, raw, 0o644)
	}
	srv, err := NewServer(cfg, e.Store, e.Mgr) // a restarted server finds the files
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	before := e.Bucket.LogGets.Load()
	resp, err := srv.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: "t", Offset: 42, MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := batch.Records(resp.Records[:readtest.Batches(t, resp.Records)[0].Size], nil)
	if err != nil || recs[0].Offset != 42 || !bytes.Equal(recs[0].Value, bytes.Repeat([]byte{42}, 5000)) {
		t.Fatalf("fetch over a corrupt cache file: wrong answer (%v)", err)
	}
	if n := e.Bucket.LogGets.Load() - before; n == 0 {
		t.Fatal("a corrupt cache file was served without a GET")
	}
}

// BenchmarkFetchWarm is a Fetch of 1 MiB whose chunk and index are cached,
// in process (no transport): tierd's own cost of a warm read, against
// BenchmarkFetchWarmBaseline, a copy of the same bytes.
func BenchmarkFetchWarm(b *testing.B) {
	e := newEnv(b, DefaultConfig())
	readtest.ReferenceLog(b, e.Rig)
	srv, err := NewServer(DefaultConfig(), e.Store, e.Mgr)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	req := &tierdpb.FetchRequest{Topic: "t", Offset: 0, MaxBytes: 1 << 20}
	resp, err := srv.Fetch(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	srv.Engine().Settle()
	b.SetBytes(int64(len(resp.Records)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := srv.Fetch(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFetchWarmBaseline(b *testing.B) {
	src := make([]byte, 1<<20)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = bytes.Clone(src)
	}
}

// panicBucket panics on every GET of an index object.
type panicBucket struct{ rsm.Bucket }

func (p panicBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if !strings.HasSuffix(key, ".log") {
		panic("bucket bug on an index GET")
	}
	return p.Bucket.GetRange(ctx, key, off, length)
}

// A bucket client that panics on an index GET fails the fetch, not the
// daemon.
func TestIndexLoadPanic(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	mgr, err := rsm.NewManager(panicBucket{e.Bucket}, rsm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(DefaultConfig(), e.Store, mgr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := srv.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: "t", Offset: 300, MaxBytes: 1}); status.Code(err) != codes.Unavailable {
		t.Fatalf("fetch over a panicking index GET: %v, want UNAVAILABLE", err)
	}
}

// stallBucket sends the first n bytes of every .log body, then holds the
// rest until the GET's context ends or, with fail, fails the read (a
// connection reset mid-body).
type stallBucket struct {
	rsm.Bucket
	n    int64
	fail bool
}

type stallReader struct {
	ctx  context.Context
	r    io.Reader
	left int64
	fail bool
}

func (s *stallReader) Read(p []byte) (int, error) {
	if s.left <= 0 {
		if s.fail {
			return 0, errors.New("connection reset by peer")
		}
		<-s.ctx.Done()
		return 0, s.ctx.Err()
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	return n, err
}

func (b stallBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := b.Bucket.GetRange(ctx, key, off, length)
	if err != nil || !strings.HasSuffix(key, ".log") {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&stallReader{ctx: ctx, r: rc, left: b.n, fail: b.fail}, rc}, nil
}

// remote.fetch.max.wait.ms: a body that stalls after 20000 bytes (three
// whole 5070-byte batches and part of a fourth) gives, after the wait,
// the batches that arrived whole; one that stalls before the first batch
// is whole gives UNAVAILABLE.
func TestMaxWaitPartialAnswer(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 1000 // the first 20000 bytes must arrive within it, on a loaded machine too
	for _, tc := range []struct {
		stallAt int64
		want    int // batches; 0: UNAVAILABLE
	}{{20000, 3}, {3000, 0}} {
		mgr, _ := rsm.NewManager(stallBucket{Bucket: e.Bucket, n: tc.stallAt}, rsm.Config{})
		srv, err := NewServer(cfg, e.Store, mgr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, err := srv.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: "t", Offset: 0, MaxBytes: 1 << 20})
		took := time.Since(start)
		srv.Close()
		if took > 10*time.Second {
			t.Errorf("stall at %d: answered after %s, want about 1s", tc.stallAt, took)
		}
		if tc.want == 0 {
			if status.Code(err) != codes.Unavailable {
				t.Errorf("stall at %d: %v, want UNAVAILABLE", tc.stallAt, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("stall at %d: %v", tc.stallAt, err)
		}
		if bs := readtest.Batches(t, resp.Records); len(bs) != tc.want || resp.NextOffset != int64(tc.want) {
			t.Errorf("stall at %d: %d batches, next %d; want %d", tc.stallAt, len(bs), resp.NextOffset, tc.want)
		}
	}
}

// With a memory budget of two chunks, a cold 1 MiB fetch still loads its
// bytes once: the chunks it reads stay pinned to it.
func TestTightMemoryOneLoad(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.Cache.MemoryBytes = 128 << 10
	cfg.PrefetchBytes = 0
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	checkFetch(t, e, 300, 1) // offset index of segment 1
	before, read := e.Bucket.LogGets.Load(), e.Bucket.Read.Load()
	resp := checkFetch(t, e, 210, 1<<20)
	if n := e.Bucket.LogGets.Load() - before; n != 1 {
		t.Errorf("%d .log GETs for one cold fetch under a tight budget, want 1", n)
	}
	if r := e.Bucket.Read.Load() - read; r > int64(len(resp.Records))+32<<10 {
		t.Errorf("read %d bytes from the bucket for a %d-byte answer", r, len(resp.Records))
	}
}

// BenchmarkReadRemoteWarm is BenchmarkFetchWarm through the Go API, as
// the Kafka listener reads: it must cost no more than the Fetch RPC's
// handler.
func BenchmarkReadRemoteWarm(b *testing.B) {
	e := newEnv(b, DefaultConfig())
	readtest.ReferenceLog(b, e.Rig)
	srv, err := NewServer(DefaultConfig(), e.Store, e.Mgr)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	rr, err := srv.Engine().ReadRemote(ctx, e.TP, 0, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	srv.Engine().Settle()
	b.SetBytes(int64(len(rr.Records)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := srv.Engine().ReadRemote(ctx, e.TP, 0, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}
