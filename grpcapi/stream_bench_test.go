package grpcapi

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/seglog"
)

// gatherServer answers Fetch as tierd did before multi-slice answers:
// records gathered into one buffer when they span chunks.
type gatherServer struct {
	tierdpb.UnimplementedRemoteFetchServer
	s *Server
}

func (g gatherServer) Fetch(ctx context.Context, req *tierdpb.FetchRequest) (*tierdpb.FetchResponse, error) {
	rr, err := g.s.Engine().ReadRemote(ctx, remotelog.TopicPartition{Topic: req.Topic, Partition: req.Partition}, req.Offset, int(req.MaxBytes))
	if err != nil {
		return nil, toStatus(err).Err()
	}
	return &tierdpb.FetchResponse{Records: rr.Records, LogStartOffset: rr.Offsets.LogStartOffset,
		HighestTieredOffset: rr.Offsets.HighestTieredOffset, NextOffset: rr.Next}, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFetchCPU compares the CPU (client and server, one process; the
// answers come from the warm chunk cache, so MinIO does nothing) per GiB
// replayed, and the allocations, of three ways to read the same log
// sequentially, 4 MiB answers across 4 MiB chunks:
//
//	gather      the answer gathered into one buffer when it spans chunks,
//	            the proto codec on the client (two copies): before
//	multislice  the unary Fetch answered as views of the chunks, the
//	            client codec (one copy)
//	stream      FetchStream, into pooled buffers (PartitionReader.Fetch)
//	stream_own  FetchStream into buffers the caller owns (ReadRemote, as
//	            seglog reads)
//
// The modes take turns within each iteration. Reported: each mode's CPU
// seconds per GiB, allocations per MiB and allocated bytes per byte
// served, and each one's CPU and allocated bytes relative to gather (no
// timing is asserted).
func BenchmarkFetchCPU(b *testing.B) {
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 30_000
	cfg.Cache.ChunkBytes = 4 << 20 // what the doc says, whatever the default
	e := newMinIOEnv(b, cfg)
	dir := filepath.Join(b.TempDir(), "t-0")
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = 24 << 20
	l, err := seglog.Open(dir, scfg)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(4))
	for total := 0; total < 64<<20; {
		v := make([]byte, 8<<10+rng.Intn(56<<10))
		rng.Read(v)
		if _, err := l.Append(seglog.Record{Value: v}); err != nil {
			b.Fatal(err)
		}
		total += len(v)
	}
	l.Roll()
	l.Close()
	e.Tier(dir)
	ls, err := e.api.ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: e.TP.Topic})
	if err != nil {
		b.Fatal(err)
	}
	hto := ls.HighestTieredOffset

	// The "before" server and client: generated handler, plain proto client.
	gs := grpc.NewServer(ServerOptions()...)
	tierdpb.RegisterRemoteFetchServer(gs, gatherServer{s: e.srv})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go gs.Serve(lis)
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31-1)),
		grpc.WithInitialWindowSize(windowBytes), grpc.WithInitialConnWindowSize(windowBytes),
		grpc.WithWriteBufferSize(ioBufferBytes), grpc.WithReadBufferSize(ioBufferBytes))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	old := tierdpb.NewRemoteFetchClient(conn)
	pr := e.client.Partition(e.TP.Topic, e.TP.Partition)
	const maxBytes = 4 << 20
	ctx := context.Background()

	type mode struct {
		name               string
		read               func(off int64) (n int, next int64, err error)
		cpu                time.Duration
		n                  int64
		allocs, allocBytes uint64
	}
	unary := func(c tierdpb.RemoteFetchClient) func(int64) (int, int64, error) {
		return func(off int64) (int, int64, error) {
			r, err := c.Fetch(ctx, &tierdpb.FetchRequest{Topic: e.TP.Topic, Offset: off, MaxBytes: maxBytes})
			return len(r.GetRecords()), r.GetNextOffset(), err
		}
	}
	modes := []*mode{
		{name: "gather", read: unary(old)},
		{name: "multislice", read: unary(e.api)},
		{name: "stream", read: func(off int64) (int, int64, error) {
			r, err := pr.Fetch(ctx, off, maxBytes, tierdpb.IsolationLevel_READ_UNCOMMITTED)
			if err != nil {
				return 0, 0, err
			}
			defer r.Release()
			return len(r.Records), r.NextOffset, nil
		}},
		{name: "stream_own", read: func(off int64) (int, int64, error) {
			r, err := e.client.fetch(ctx, &tierdpb.FetchRequest{Topic: e.TP.Topic, Offset: off, MaxBytes: maxBytes})
			if err != nil {
				return 0, 0, err
			}
			return len(r.Records), r.NextOffset, nil
		}},
	}
	replay := func(m *mode) (int64, error) {
		var total int64
		for off := int64(0); off <= hto; {
			n, next, err := m.read(off)
			if err != nil {
				return total, fmt.Errorf("%s at %d: %w", m.name, off, err)
			}
			total += int64(n)
			off = next
		}
		return total, nil
	}
	for _, m := range modes { // warm the cache and the pools
		if _, err := replay(m); err != nil {
			b.Fatal(err)
		}
	}
	var ms runtime.MemStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range modes {
			m := modes[(i+k)%len(modes)]
			runtime.ReadMemStats(&ms)
			allocs, bytes0, t0 := ms.Mallocs, ms.TotalAlloc, cpuTime()
			n, err := replay(m)
			if err != nil {
				b.Fatal(err)
			}
			m.cpu += cpuTime() - t0
			runtime.ReadMemStats(&ms)
			m.allocs += ms.Mallocs - allocs
			m.allocBytes += ms.TotalAlloc - bytes0
			m.n += n
		}
	}
	b.StopTimer()
	base := modes[0]
	perGiB := func(m *mode) float64 { return m.cpu.Seconds() / (float64(m.n) / (1 << 30)) }
	for _, m := range modes {
		b.ReportMetric(perGiB(m), m.name+"-cpu-s/GiB")
		b.ReportMetric(float64(m.allocs)/(float64(m.n)/(1<<20)), m.name+"-allocs/MiB")
		b.ReportMetric(float64(m.allocBytes)/float64(m.n), m.name+"-allocB/B")
		if m != base {
			b.ReportMetric(perGiB(m)/perGiB(base), m.name+"/gather-cpu")
		}
	}
}
