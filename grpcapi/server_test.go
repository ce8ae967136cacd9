package grpcapi

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/rsm"
)

// env is a server over a readtest.Rig (its Store, Mgr, Bucket and TP),
// with clients.
type env struct {
	*readtest.Rig
	t      testing.TB
	srv    *Server
	api    tierdpb.RemoteFetchClient
	client *Client
	local  *Client // on the admin socket
	addr   string  // the server's host:port
}

// newEnv starts a server on a real socket over a filesystem bucket and
// Pebble.
func newEnv(t testing.TB, cfg Config, opts ...Option) *env {
	t.Helper()
	return newEnvOn(t, readtest.FSBucket(t), cfg, opts...)
}

// newEnvOn is newEnv over bucket b.
func newEnvOn(t testing.TB, b rsm.Bucket, cfg Config, opts ...Option) *env {
	t.Helper()
	e := &env{Rig: readtest.NewRig(t, b), t: t}
	e.serve(cfg, e.Mgr, opts...)
	return e
}

// serve starts a server of cfg over e's metadata store and mgr on a real
// socket (stopped at the test's end) and makes it e's, with a client.
func (e *env) serve(cfg Config, mgr *rsm.Manager, opts ...Option) {
	t := e.t
	t.Helper()
	srv, err := NewServer(cfg, e.Store, mgr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	sock := filepath.Join(t.TempDir(), "admin", "tierd.sock")
	ulis, err := ListenLocal(sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- srv.Serve(ctx, lis) }()
	go func() { done <- srv.ServeLocal(ctx, ulis) }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	e.addr = lis.Addr().String()
	if e.client, err = Dial(e.addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.client.Close() })
	e.api = e.client.API()
	if e.local, err = Dial("unix://" + sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.local.Close() })
}

func (e *env) fetch(offset int64, maxBytes int32) (*tierdpb.FetchResponse, error) {
	return e.api.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: e.TP.Topic, Partition: e.TP.Partition, Offset: offset, MaxBytes: maxBytes})
}

func TestFetchReference(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.PrefetchBytes = 0 // so that each fetch's own reads can be measured
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	for off := int64(0); off < 600; off++ {
		before := e.Bucket.Read.Load()
		resp, err := e.fetch(off, 1)
		if err != nil {
			t.Fatalf("fetch %d: %v", off, err)
		}
		bs := readtest.Batches(t, resp.Records)
		if len(bs) != 1 || bs[0].BaseOffset != off || resp.NextOffset != off+1 || resp.HighestTieredOffset != 599 {
			t.Fatalf("fetch %d: %d batches from %d, next %d", off, len(bs), bs[0].BaseOffset, resp.NextOffset)
		}
		// Ranged reads of a chunk or two, never the whole ~1 MiB segment
		// (indexes are cached after the first fetch of a segment).
		if read := e.Bucket.Read.Load() - before; read > 140<<10 {
			t.Fatalf("fetch %d read %d bytes from the bucket", off, read)
		}
		recs, err := batch.Records(resp.Records, nil)
		if err != nil || !bytes.Equal(recs[0].Value, bytes.Repeat([]byte{byte(off)}, 5000)) {
			t.Fatalf("fetch %d: wrong record (%v)", off, err)
		}
	}
	// max_bytes: whole batches within the limit, in one segment.
	resp, err := e.fetch(10, 3*5070+100)
	if err != nil || len(readtest.Batches(t, resp.Records)) != 3 || resp.NextOffset != 13 {
		t.Fatalf("3 batches: %v %v", resp.GetNextOffset(), err)
	}
	resp, _ = e.fetch(200, 1<<20)
	if bs := readtest.Batches(t, resp.Records); bs[len(bs)-1].LastOffset != 205 {
		t.Fatalf("a fetch crossed a segment end: last %d", bs[len(bs)-1].LastOffset)
	}
	// ListOffsets.
	for _, tc := range []struct {
		spec     tierdpb.OffsetSpec
		ts, want int64
		wantTS   int64
	}{
		{tierdpb.OffsetSpec_EARLIEST, 0, 0, -1}, {tierdpb.OffsetSpec_LATEST_TIERED, 0, 599, -1},
		{tierdpb.OffsetSpec_TIMESTAMP, 0, 0, 1_000_000}, {tierdpb.OffsetSpec_TIMESTAMP, 1_002_055, 206, 1_002_060},
		{tierdpb.OffsetSpec_TIMESTAMP, 1_005_990, 599, 1_005_990}, {tierdpb.OffsetSpec_TIMESTAMP, 1_005_991, -1, -1},
	} {
		r, err := e.api.ListOffsets(context.Background(), &tierdpb.ListOffsetsRequest{Topic: "t", Spec: tc.spec, Timestamp: tc.ts})
		if err != nil || r.Offset != tc.want || r.Timestamp != tc.wantTS {
			t.Errorf("ListOffsets(%v, %d) = %v, %v; want %d at %d", tc.spec, tc.ts, r, err, tc.want, tc.wantTS)
		}
	}
	ls, err := e.api.ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: "t"})
	if err != nil || len(ls.Segments) != 3 || ls.Segments[1].StartOffset != 206 || ls.Segments[1].State != "COPY_SEGMENT_FINISHED" {
		t.Fatalf("ListSegments: %v %v", ls, err)
	}
}

func TestFetchErrors(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	if _, err := e.Store.AdvanceOffsets(e.TP, 206, -1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, tc := range map[string]struct {
		call func() error
		code codes.Code
	}{
		"empty topic":        {func() error { _, err := e.api.Fetch(ctx, &tierdpb.FetchRequest{Offset: 1}); return err }, codes.InvalidArgument},
		"negative partition": {func() error { _, err := e.api.Fetch(ctx, &tierdpb.FetchRequest{Topic: "t", Partition: -1}); return err }, codes.InvalidArgument},
		"negative offset":    {func() error { _, err := e.fetch(-5, 10); return err }, codes.InvalidArgument},
		"negative max":       {func() error { _, err := e.fetch(300, -1); return err }, codes.InvalidArgument},
		"unknown partition":  {func() error { _, err := e.api.Fetch(ctx, &tierdpb.FetchRequest{Topic: "t", Partition: 9}); return err }, codes.NotFound},
		"below start":        {func() error { _, err := e.fetch(100, 10); return err }, codes.OutOfRange},
		"past tiered":        {func() error { _, err := e.fetch(600, 10); return err }, codes.OutOfRange},
		"bad spec": {func() error {
			_, err := e.api.ListOffsets(ctx, &tierdpb.ListOffsetsRequest{Topic: "t", Spec: 42})
			return err
		}, codes.InvalidArgument},
		"segments of nothing": {func() error {
			_, err := e.api.ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: "nope"})
			return err
		}, codes.NotFound},
	} {
		if err := tc.call(); status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	// OUT_OF_RANGE carries the valid range, which the client decodes.
	_, err := e.client.Partition("t", 0).ReadRemote(ctx, 100, 10)
	var oor *OutOfRangeError
	if !asOOR(err, &oor) || oor.LogStartOffset != 206 || oor.HighestTieredOffset != 599 {
		t.Fatalf("client error %v", err)
	}
}

func asOOR(err error, target **OutOfRangeError) bool {
	o, ok := err.(*OutOfRangeError)
	if ok {
		*target = o
	}
	return ok
}

// TestFetchGapsAndCompression: a compacted segment whose surviving offsets
// are 3, 50, 97 followed by a segment at 100; a compressed 10-record batch.
func TestFetchGapsAndCompression(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	dir := filepath.Join(t.TempDir(), "t-0")
	os.MkdirAll(dir, 0o755)
	write := func(base int64, entries ...[]byte) {
		var data []byte
		for _, b := range entries {
			data = append(data, b...)
		}
		os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.LogSuffix)), data, 0o644)
		os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.IndexSuffix)), nil, 0o644)
		os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, kafkalog.TimeIndexSuffix)), nil, 0o644)
	}
	one := func(off int64, c batch.Codec, n int) []byte {
		p := batch.NewParams(off, 0)
		p.Codec = c
		recs := make([]batch.Record, n)
		for i := range recs {
			recs[i] = batch.Record{Timestamp: 1000 + off + int64(i), Value: []byte{byte(off + int64(i))}}
		}
		b, err := batch.AppendBatch(nil, p, recs, codec.Kafka)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write(0, one(3, batch.CodecNone, 1), one(50, batch.CodecNone, 1), one(97, batch.CodecNone, 1))
	write(100, one(100, batch.CodecZstd, 10), one(110, batch.CodecGzip, 10))
	write(120)
	e.Tier(dir)
	for _, tc := range []struct{ offset, want int64 }{{0, 3}, {3, 3}, {10, 50}, {51, 97}, {98, 100}, {99, 100}, {105, 100}, {119, 110}} {
		resp, err := e.fetch(tc.offset, 1)
		if err != nil {
			t.Fatalf("fetch %d: %v", tc.offset, err)
		}
		if bs := readtest.Batches(t, resp.Records); len(bs) != 1 || bs[0].BaseOffset != tc.want {
			t.Errorf("fetch %d starts at %d, want %d", tc.offset, bs[0].BaseOffset, tc.want)
		}
	}
	// Timestamps are 1000 + offset; inside compressed batches the records
	// are decompressed to find the first one late enough.
	for _, tc := range []struct{ ts, want int64 }{{1105, 105}, {1113, 113}, {1060, 97}} {
		r, err := e.api.ListOffsets(context.Background(), &tierdpb.ListOffsetsRequest{Topic: "t", Spec: tierdpb.OffsetSpec_TIMESTAMP, Timestamp: tc.ts})
		if err != nil || r.Offset != tc.want || r.Timestamp != 1000+tc.want {
			t.Errorf("ListOffsets(%d) = %v %v, want %d", tc.ts, r, err, tc.want)
		}
	}
}

// hookRemote runs a hook before the first index read (once).
type hookRemote struct {
	remoteread.Remote
	once func()
}

func (h *hookRemote) FetchIndex(ctx context.Context, meta remotelog.SegmentMetadata, t remotelog.IndexType) ([]byte, error) {
	if h.once != nil {
		f := h.once
		h.once = nil
		f()
	}
	return h.Remote.FetchIndex(ctx, meta, t)
}

// A fetch whose metadata snapshot predates a retention delete gets
// OUT_OF_RANGE with the new range, not DATA_LOSS; once every copy is gone
// the partition answers OUT_OF_RANGE and EARLIEST, not NOT_FOUND.
func TestFetchRacingRetention(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	fin, _ := e.Store.FinishedSegments(e.TP)
	retain := func(r remotelog.SegmentMetadata) {
		if _, err := e.Store.AdvanceOffsets(e.TP, r.EndOffset+1, -1); err != nil {
			t.Fatal(err)
		}
		e.Store.UpdateState(e.TP, r.StartOffset, r.ID, remotelog.DeleteSegmentStarted)
		e.Mgr.DeleteSegment(context.Background(), r)
		e.Store.UpdateState(e.TP, r.StartOffset, r.ID, remotelog.DeleteSegmentFinished)
	}
	srv, err := NewServer(DefaultConfig(), e.Store, &hookRemote{Remote: e.Mgr, once: func() { retain(fin[0]) }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = srv.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: "t", Offset: 50, MaxBytes: 1})
	if status.Code(err) != codes.OutOfRange {
		t.Fatalf("fetch racing retention: %v, want OUT_OF_RANGE", err)
	}
	retain(fin[1])
	retain(fin[2])
	if _, err := e.fetch(300, 1); status.Code(err) != codes.OutOfRange {
		t.Fatalf("fetch after every copy went: %v", err)
	}
	r, err := e.api.ListOffsets(context.Background(), &tierdpb.ListOffsetsRequest{Topic: "t", Spec: tierdpb.OffsetSpec_EARLIEST})
	if err != nil || r.Offset != 600 {
		t.Fatalf("earliest after every copy went: %v %v", r, err)
	}
}

// Case 12: the same cached index evicted and reloaded under concurrent
// fetches, 10,000 times: no error and no wrong batch.
func TestIndexCacheChurn(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IndexCacheBytes = 4000 // one segment's offset index: every switch of segment evicts
	cfg.Cache.ChunkBytes = 16 << 10
	cfg.Cache.MemoryBytes = 64 << 10 // and chunks churn too
	// Churn is the point, not the wait bound: on a loaded machine a load
	// can take longer than the default 500 ms, which answers UNAVAILABLE
	// (retry) by design.
	cfg.MaxWaitMs = 30000
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	const workers, perWorker = 8, 1250
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			for i := 0; i < perWorker; i++ {
				off := int64((w*perWorker+i)*7919) % 600
				resp, err := e.fetch(off, 1)
				if err != nil {
					errs <- fmt.Errorf("fetch %d: %w", off, err)
					return
				}
				if b, err := batch.ParseHeader(resp.Records, 0); err != nil || b.BaseOffset != off {
					errs <- fmt.Errorf("fetch %d: got batch %d (%v)", off, b.BaseOffset, err)
					return
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Offsets no copy covers (a segment the broker deleted before it was
// copied) answer DATA_LOSS, not the next batch.
func TestFetchHole(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	fin, _ := e.Store.FinishedSegments(e.TP)
	e.Store.UpdateState(e.TP, fin[1].StartOffset, fin[1].ID, remotelog.DeleteSegmentStarted) // [206, 411] gone, LSO untouched
	if _, err := e.fetch(300, 1); status.Code(err) != codes.DataLoss {
		t.Fatalf("fetch in a hole: %v", err)
	}
	if resp, err := e.fetch(100, 1); err != nil || len(resp.Records) == 0 {
		t.Fatalf("fetch before the hole: %v", err)
	}
}
