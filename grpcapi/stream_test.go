package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/seglog"
)

// newMinIOEnv is newEnv over a real MinIO on 127.0.0.1.
func newMinIOEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	return newEnvOn(t, readtest.MinIOBucket(t, "tierd"), cfg)
}

// variedLog writes n batches of one record each, of random sizes from
// 100 bytes to 40 KiB (random, so incompressible), in segments of about
// 1 MiB, tiers the rolled ones, and returns the log (open, local only:
// the reference answers) and the highest tiered offset.
func variedLog(t testing.TB, e *env, rng *rand.Rand, n int) (*seglog.Log, int64) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		v := make([]byte, 100+rng.Intn(40<<10))
		rng.Read(v)
		if _, err := l.Append(seglog.Record{Value: v, Timestamp: 1_000_000 + int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	l.Roll()
	e.Tier(dir)
	ls, err := e.api.ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: e.TP.Topic})
	if err != nil || len(ls.Segments) < 3 {
		t.Fatalf("tiered %v segments: %v", len(ls.GetSegments()), err)
	}
	return l, ls.HighestTieredOffset
}

// fetchStream reads a whole FetchStream answer: the parts' records
// concatenated, the last part's next offset, and the number of parts.
func (e *env) fetchStream(ctx context.Context, req *tierdpb.FetchRequest) (records []byte, next int64, parts int, err error) {
	st, err := e.api.FetchStream(ctx, req)
	if err != nil {
		return nil, 0, 0, err
	}
	for {
		p, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return records, next, parts, nil
		}
		if err != nil {
			return records, next, parts, err
		}
		parts++
		records = append(records, p.Records...)
		next = p.NextOffset
		if p.HighestTieredOffset < 0 || p.LogStartOffset != 0 {
			return nil, 0, parts, errors.New("a part without the partition's offsets")
		}
	}
}

// waitUnpinned waits (at most 10 s) for the cache to have no Pin left:
// gRPC lets go of a response's buffers just after writing them.
func waitUnpinned(t *testing.T, e *env) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.srv.Engine().Cache().Pinned() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := e.srv.Engine().Cache().Pinned(); n != 0 {
		t.Fatalf("%d pins left", n)
	}
}

// TestFetchStreamModel: over random offsets and max bytes, with answers
// crossing 64 KiB chunk boundaries, from a cold, a warm and a slowly
// loading cache, the unary Fetch, FetchStream (parts concatenated), the
// client's ReadRemote and its pooled Fetch all answer exactly what the
// local log answers (seglog.Read, the same contract), with the same next
// offset; some streams come in several parts; no pin is left.
func TestFetchStreamModel(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.Cache.MemoryBytes = 4 << 20
	cfg.MaxWaitMs = 30_000 // no answer cut short by the wait: all four must agree
	e := newMinIOEnv(t, cfg)
	rng := rand.New(rand.NewSource(1))
	ref, hto := variedLog(t, e, rng, 260)
	defer ref.Close()
	pr := e.client.Partition(e.TP.Topic, e.TP.Partition)
	ctx := context.Background()
	multi := 0
	for i := 0; i < 250; i++ {
		off, mb := rng.Int63n(hto+1), 1+rng.Intn(300<<10)
		if rng.Intn(3) == 0 {
			mb = 1 + rng.Intn(100)
		}
		iso := tierdpb.IsolationLevel(rng.Intn(2))
		switch i % 4 {
		case 0:
			e.srv.Engine().DropCaches(false)
			e.Bucket.Pace.Store(0)
		case 1:
			e.srv.Engine().DropCaches(false)
			e.Bucket.Pace.Store(int64(200 * time.Microsecond)) // bodies arrive over several ms
		default:
			e.Bucket.Pace.Store(0)
		}
		want, err := ref.Read(off, mb)
		if err != nil || len(want) == 0 {
			t.Fatalf("reference read %d/%d: %d bytes, %v", off, mb, len(want), err)
		}
		wantNext := readtest.Batches(t, want)[len(readtest.Batches(t, want))-1].LastOffset + 1
		req := &tierdpb.FetchRequest{Topic: e.TP.Topic, Partition: e.TP.Partition, Offset: off, MaxBytes: int32(mb), IsolationLevel: iso}
		recs, next, parts, err := e.fetchStream(ctx, req)
		if err != nil || !bytes.Equal(recs, want) || next != wantNext {
			t.Fatalf("FetchStream %d/%d: %d bytes next %d (%v); want %d bytes next %d", off, mb, len(recs), next, err, len(want), wantNext)
		}
		if parts > 1 {
			multi++
		}
		if i%4 == 1 {
			e.srv.Engine().DropCaches(false) // the unary read cold and slow too
		}
		u, err := e.api.Fetch(ctx, req)
		if err != nil || !bytes.Equal(u.Records, want) || u.NextOffset != wantNext || u.HighestTieredOffset != hto {
			t.Fatalf("Fetch %d/%d: %d bytes next %d (%v); want %d bytes next %d", off, mb, len(u.GetRecords()), u.GetNextOffset(), err, len(want), wantNext)
		}
		rr, err := pr.ReadRemote(ctx, off, mb)
		if err != nil || !bytes.Equal(rr, want) {
			t.Fatalf("ReadRemote %d/%d: %d bytes (%v); want %d", off, mb, len(rr), err, len(want))
		}
		b, err := pr.Fetch(ctx, off, mb, iso)
		if err != nil || !bytes.Equal(b.Records, want) || b.NextOffset != wantNext || b.HighestTieredOffset != hto {
			t.Fatalf("client Fetch %d/%d: %v", off, mb, err)
		}
		b.Release()
		if b.Records != nil {
			t.Fatal("Records kept after Release")
		}
	}
	if multi == 0 {
		t.Fatal("no stream came in more than one part")
	}
	t.Logf("%d of 250 streams in several parts", multi)
	waitUnpinned(t, e)
}

// TestClientAliasingConcurrent: readers on one connection, each checking
// every answer against the reference while the others read (pooled
// buffers released and reused, owned ones kept): no answer changes under
// its reader, and -race sees no shared memory.
func TestClientAliasingConcurrent(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.MaxWaitMs = 30_000
	e := newMinIOEnv(t, cfg)
	ref, hto := variedLog(t, e, rand.New(rand.NewSource(2)), 200)
	defer ref.Close()
	pr := e.client.Partition(e.TP.Topic, e.TP.Partition)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var kept [][]byte // owned answers, checked again at the end
	var keptWant [][]byte
	var mu sync.Mutex
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(10 + g)))
			for i := 0; i < 40; i++ {
				off, mb := rng.Int63n(hto+1), 1+rng.Intn(200<<10)
				want, err := ref.Read(off, mb)
				if err != nil {
					errs <- err
					return
				}
				b, err := pr.Fetch(context.Background(), off, mb, tierdpb.IsolationLevel_READ_UNCOMMITTED)
				if err != nil {
					errs <- err
					return
				}
				got := b.Records
				time.Sleep(time.Duration(rng.Intn(200)) * time.Microsecond) // others receive meanwhile
				if !bytes.Equal(got, want) {
					errs <- errors.New("pooled answer changed before Release")
					return
				}
				b.Release()
				own, err := pr.ReadRemote(context.Background(), off, mb)
				if err != nil {
					errs <- err
					return
				}
				u, err := e.api.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: e.TP.Topic, Offset: off, MaxBytes: int32(mb)})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				kept, keptWant = append(kept, own, u.Records), append(keptWant, want, want)
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range kept {
		if !bytes.Equal(kept[i], keptWant[i]) {
			t.Fatalf("owned answer %d changed after later reads", i)
		}
	}
	waitUnpinned(t, e)
}

// TestFetchStreamCancelReleasesPins: a client that cancels a stream after
// its first part, while the rest still loads slowly, leaves no pin behind
// on the server (the read's own and the parts' not yet written).
func TestFetchStreamCancelReleasesPins(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.MaxWaitMs = 30_000
	e := newMinIOEnv(t, cfg)
	_, hto := variedLog(t, e, rand.New(rand.NewSource(3)), 100)
	for _, cancelAfter := range []int{0, 1} {
		e.srv.Engine().DropCaches(false)
		e.Bucket.Pace.Store(int64(5 * time.Millisecond)) // 16 KiB per 5 ms
		ctx, cancel := context.WithCancel(context.Background())
		st, err := e.api.FetchStream(ctx, &tierdpb.FetchRequest{Topic: e.TP.Topic, Offset: 0, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < cancelAfter; i++ {
			if p, err := st.Recv(); err != nil || len(p.Records) == 0 {
				t.Fatalf("first part: %v", err)
			}
		}
		if e.srv.Engine().Cache().Pinned() == 0 && cancelAfter > 0 {
			t.Fatal("no pin while the stream is loading")
		}
		cancel()
		if _, err := st.Recv(); status.Code(err) != codes.Canceled {
			t.Fatalf("after cancel: %v", err)
		}
		waitUnpinned(t, e)
	}
	e.Bucket.Pace.Store(0)
	e.srv.Engine().Settle()
	// The server still answers, whole.
	if recs, next, _, err := e.fetchStream(context.Background(), &tierdpb.FetchRequest{Topic: e.TP.Topic, Offset: hto, MaxBytes: 1}); err != nil || len(recs) == 0 || next != hto+1 {
		t.Fatalf("after cancels: %d bytes next %d: %v", len(recs), next, err)
	}
}

// TestFetchStreamInvalidArgument: bad arguments are INVALID_ARGUMENT from
// FetchStream, Fetch and the client, with nothing sent before.
func TestFetchStreamInvalidArgument(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	for _, req := range []*tierdpb.FetchRequest{
		{Topic: "", Offset: 0, MaxBytes: 10},
		{Topic: "t", Partition: -1, MaxBytes: 10},
		{Topic: "t", Offset: -1, MaxBytes: 10},
		{Topic: "t", Offset: 0, MaxBytes: -1},
		{Topic: "t", Offset: 0, MaxBytes: 10, IsolationLevel: tierdpb.IsolationLevel(7)},
	} {
		recs, _, parts, err := e.fetchStream(context.Background(), req)
		if status.Code(err) != codes.InvalidArgument || parts != 0 || recs != nil {
			t.Errorf("FetchStream(%v): %d parts, %v", req, parts, err)
		}
		if _, err := e.api.Fetch(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("Fetch(%v): %v", req, err)
		}
		if _, err := e.client.Partition(req.Topic, req.Partition).Fetch(context.Background(), req.Offset, int(req.MaxBytes), req.IsolationLevel); status.Code(err) != codes.InvalidArgument {
			t.Errorf("client Fetch(%v): %v", req, err)
		}
	}
	// Out of range keeps its detail through the stream.
	_, err := e.client.Partition("t", 0).ReadRemote(context.Background(), 600, 10)
	var oor *OutOfRangeError
	if !errors.As(err, &oor) || oor.HighestTieredOffset != 599 {
		t.Fatalf("ReadRemote past the end: %v", err)
	}
}

// unaryOnly is a server from before FetchStream.
type unaryOnly struct {
	tierdpb.UnimplementedRemoteFetchServer
	s *Server
}

func (u unaryOnly) Fetch(ctx context.Context, req *tierdpb.FetchRequest) (*tierdpb.FetchResponse, error) {
	return u.s.Fetch(ctx, req)
}

// TestClientFallsBackToUnary: against a server without FetchStream the
// client reads with Fetch, the same answers.
func TestClientFallsBackToUnary(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	gs := grpc.NewServer()
	tierdpb.RegisterRemoteFetchServer(gs, unaryOnly{s: e.srv})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	defer gs.Stop()
	c, err := Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, off := range []int64{0, 300, 599} {
		old, err := c.Partition("t", 0).ReadRemote(context.Background(), off, 20_000)
		if err != nil {
			t.Fatal(err)
		}
		cur, err := e.client.Partition("t", 0).ReadRemote(context.Background(), off, 20_000)
		if err != nil || !bytes.Equal(old, cur) || len(cur) == 0 {
			t.Fatalf("offset %d: unary %d bytes, stream %d (%v)", off, len(old), len(cur), err)
		}
	}
	if !c.noStream.Load() {
		t.Fatal("the client did not note the missing FetchStream")
	}
}
