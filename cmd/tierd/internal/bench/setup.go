package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/minioproc"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/s3"
	"github.com/tierd/tierd/seglog"
)

const topic = "bench"

// env is one run's parts: the bucket, tierd's metadata and fetch server
// on a real socket (gRPC, and Kafka through the listener), the local copy
// of the partition, and the transport floor server.
type env struct {
	cfg      Config
	dir      string
	minio    *minioproc.Server
	bucket   rsm.Bucket
	rec      *rsm.RecordingBucket // the run's prefix of bucket: what the run writes, it deletes
	progress io.Writer
	mgr      *rsm.Manager
	store    *rlmm.Store
	reg      *prometheus.Registry
	server   *grpcapi.Server
	fcfg     grpcapi.Config
	client   *grpcapi.Client
	floor    *grpcapi.Client
	partDir  string
	prefix   string // the run's own key prefix in the bucket (see Config.runPrefix)
	endpoint string // the S3 URL
	closeSrv func()
	tp       remotelog.TopicPartition
	fin      []remotelog.SegmentMetadata
	batches  [][]batch.Batch // per segment, from the local files
	maps     [][]byte        // per segment, the local .log mapped read-only: every answer is compared with it
	values   []byte          // the pool record values were cut from (see value)
	kafka    string          // the Kafka listener's host:port
	stops    []func()
}

// logf writes a progress line.
func (e *env) logf(format string, args ...any) { fmt.Fprintf(e.progress, format+"\n", args...) }

func (e *env) close() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
}

// setup makes the run's dir; with store, it starts (or reaches) the
// store and claims the run's prefix; with read, it also writes the partition with the embedded segment log, tiers
// its rolled segments with the copier (timed: the copy case) and starts
// the servers.
func setup(ctx context.Context, cfg Config, progress io.Writer, read, store bool) (_ *env, err error) {
	e := &env{cfg: cfg, tp: remotelog.TopicPartition{Topic: topic, Partition: 0}, progress: progress}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	e.dir = cfg.Dir
	if ents, err := os.ReadDir(e.dir); e.dir != "" && err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("--dir %s is not empty: a run needs a new or empty directory", e.dir)
	}
	if e.dir == "" {
		if e.dir, err = os.MkdirTemp("", "tierd-bench-"); err != nil {
			return nil, err
		}
		e.stops = append(e.stops, func() { os.RemoveAll(e.dir) })
	}
	if !store {
		return e, nil
	}
	endpoint := cfg.S3Endpoint
	defer func() { e.endpoint = endpoint }()
	if endpoint == "" {
		if e.minio, err = minioproc.Start(filepath.Join(e.dir, "minio")); err != nil {
			return nil, err
		}
		e.stops = append(e.stops, e.minio.Stop)
		endpoint = "http://" + e.minio.Endpoint
		os.Setenv("AWS_ACCESS_KEY_ID", minioproc.AccessKey)
		os.Setenv("AWS_SECRET_ACCESS_KEY", minioproc.SecretKey)
		fmt.Fprintf(progress, "started MinIO at %s (pid %d)\n", endpoint, e.minio.Pid())
	}
	scfg := s3.DefaultConfig()
	scfg.Endpoint, scfg.Bucket, scfg.Region, scfg.PathStyle = endpoint, cfg.Bucket, cfg.Region, true
	b, err := s3.New(ctx, scfg, nil)
	if err != nil {
		return nil, err
	}
	e.bucket = b
	e.stops = append(e.stops, func() { b.Close() })
	if err := b.EnsureBucket(ctx); err != nil {
		return nil, err
	}
	if e.prefix, err = cfg.runPrefix(); err != nil {
		return nil, err
	}
	rec, err := rsm.ClaimPrefix(ctx, b, e.prefix)
	if err != nil {
		return nil, fmt.Errorf("the bench writes only under a new prefix of its own: %w", err)
	}
	e.stops = append(e.stops, func() { // leave the bucket as it was: delete what this run wrote, only that
		n, err := rec.DeleteWritten(context.Background())
		fmt.Fprintf(progress, "deleted the %d objects this run wrote under %s in %s\n", n, rec.Prefix(), b.Name())
		if err != nil {
			fmt.Fprintf(progress, "tierd bench: cleaning up: %v\n", err)
		}
	})
	e.rec = rec
	if !read {
		return e, nil
	}
	var mb rsm.Bucket = rec
	if cfg.StoreLatency > 0 {
		mb = &slowBucket{Bucket: rec, delay: cfg.StoreLatency}
	}
	if e.mgr, err = rsm.NewManager(mb, rsm.Config{Prefix: e.prefix}); err != nil {
		return nil, err
	}
	if e.store, err = rlmm.Open(rlmm.Config{Dir: filepath.Join(e.dir, "metadata")}); err != nil {
		return nil, err
	}

	start := time.Now()
	logDir := filepath.Join(e.dir, "logs")
	e.partDir = filepath.Join(logDir, topic+"-0")
	if e.values, err = writePartition(e.partDir, cfg); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "wrote %d MiB in %d MiB segments in %s\n", cfg.TotalBytes>>20, cfg.SegmentBytes>>20, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := e.tier(ctx, logDir); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "tierd copied %d segments to %s in %s\n", len(e.fin), b.Name(), time.Since(start).Round(time.Millisecond))
	if err := e.scanLocal(); err != nil {
		return nil, err
	}
	return e, e.serve()
}

// writePartition writes records of random (incompressible) bytes, 16 to a
// batch, until the partition holds cfg.TotalBytes, then rolls. The record
// at offset o (the log starts at 0) has the value valueAt(values, o,
// cfg.RecordBytes); it returns values.
func writePartition(dir string, cfg Config) ([]byte, error) {
	lcfg := seglog.DefaultConfig()
	lcfg.SegmentBytes = cfg.SegmentBytes
	l, err := seglog.Open(dir, lcfg)
	if err != nil {
		return nil, err
	}
	values := make([]byte, 1<<20+cfg.RecordBytes)
	rand.Read(values)
	var written int64
	recs := make([]seglog.Record, 16)
	now := time.Now().UnixMilli() // recent: inside retention.ms
	for i := int64(0); written < cfg.TotalBytes; i++ {
		for j := range recs {
			recs[j] = seglog.Record{Value: valueAt(values, i*16+int64(j), cfg.RecordBytes), Timestamp: now}
		}
		if _, err := l.AppendBatch(batch.CodecNone, recs...); err != nil {
			l.Close()
			return nil, err
		}
		written += int64(16 * (cfg.RecordBytes + 20))
	}
	if err := l.Roll(); err != nil {
		l.Close()
		return nil, err
	}
	return values, l.Close()
}

// valueAt is the value writePartition gives the record at offset: n bytes
// of values from a position that moves 4099 bytes per offset.
func valueAt(values []byte, offset int64, n int) []byte {
	o := offset * 4099 % (1 << 20)
	return values[o : o+int64(n)]
}

// tier runs copier passes until every rolled segment is copied; local
// retention keeps the local files (local_read reads them).
func (e *env) tier(ctx context.Context, logDir string) error {
	ccfg := copier.DefaultConfig()
	ccfg.LogDirs = []string{logDir}
	ccfg.OwnershipLease = 0 // the bench alone writes its prefix
	c, err := copier.New(ccfg, e.store, e.mgr, copier.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	want := 0
	ents, _ := os.ReadDir(e.partDir)
	for _, en := range ents {
		if filepath.Ext(en.Name()) == ".log" {
			want++
		}
	}
	want-- // the active segment stays
	for pass := 0; ; pass++ {
		if _, err := c.Sync(ctx); err != nil {
			return err
		}
		if e.fin, err = e.store.FinishedSegments(e.tp); err != nil {
			return err
		}
		if len(e.fin) >= want {
			return nil
		}
		if pass == 20 {
			return fmt.Errorf("only %d of %d segments copied after 20 passes", len(e.fin), want)
		}
	}
}

// scanLocal reads the batch positions of every tiered segment from the
// local files (the expected answer of every fetch) and maps each file
// read-only, so that the replays compare every answer byte for byte
// without a copy (a comparison costs about 0.1 CPU-s per GiB).
func (e *env) scanLocal() error {
	for _, m := range e.fin {
		p := filepath.Join(e.partDir, fmt.Sprintf("%020d.log", m.StartOffset))
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		s := batch.NewScanner(f, m.SizeInBytes, batch.ScanOptions{})
		var bs []batch.Batch
		for s.Next() {
			bs = append(bs, s.Batch())
		}
		if s.Err() != nil {
			f.Close()
			return fmt.Errorf("%s: %w", p, s.Err())
		}
		// MAP_POPULATE maps every page now: the page faults of the
		// comparison's first pass over the file would otherwise be
		// counted in the CPU of the case that reads it first (replay).
		data, err := syscall.Mmap(int(f.Fd()), 0, int(m.SizeInBytes), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
		f.Close()
		if err != nil {
			return fmt.Errorf("map %s: %w", p, err)
		}
		e.stops = append(e.stops, func() { syscall.Munmap(data) })
		e.batches = append(e.batches, bs)
		e.maps = append(e.maps, data)
	}
	return nil
}

// closeServer stops the in-process fetch server and closes the metadata
// store.
func (e *env) closeServer() {
	if e.closeSrv != nil {
		e.closeSrv()
		e.closeSrv = nil
	}
}

func listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// serve starts tierd's fetch server, its Kafka listener and the floor
// server, each on its own socket, and dials the gRPC ones.
func (e *env) serve() error {
	fcfg := e.cfg.FetchConfig()
	e.reg = prometheus.NewRegistry()
	e.fcfg = fcfg
	srv, err := grpcapi.NewServer(fcfg, e.store, e.mgr, grpcapi.WithRegisterer(e.reg))
	if err != nil {
		return err
	}
	e.server = srv
	lis, err := listen()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	stopKafka, err := e.serveKafka()
	if err != nil {
		cancel()
		<-done
		return err
	}
	if e.client, err = grpcapi.Dial(lis.Addr().String()); err != nil {
		stopKafka()
		cancel()
		<-done
		return err
	}
	var once sync.Once
	e.closeSrv = func() {
		once.Do(func() {
			stopKafka() // it reads through the fetch server
			e.client.Close()
			cancel()
			<-done
			e.store.Close()
		})
	}
	e.stops = append(e.stops, e.closeSrv)

	flis, err := listen()
	if err != nil {
		return err
	}
	gs := grpc.NewServer(grpcapi.ServerOptions()...)
	tierdpb.RegisterRemoteFetchServer(gs, newFloor(int(e.cfg.MaxBytes)+1<<20))
	go gs.Serve(flis)
	e.stops = append(e.stops, gs.Stop)
	if e.floor, err = grpcapi.Dial(flis.Addr().String()); err != nil {
		return err
	}
	e.stops = append(e.stops, func() { e.floor.Close() })
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if !e.client.WaitReady(wctx) || !e.floor.WaitReady(wctx) {
		return errors.New("bench: servers did not come up")
	}
	return nil
}

// floor answers Fetch with max_bytes bytes from memory and does nothing
// else: the cost of the RPC and its transport alone. The bytes come from
// a pool larger than a CPU cache, a different part each time, so they are
// read from memory as tierd's cached chunks are.
type floor struct {
	tierdpb.UnimplementedRemoteFetchServer
	pool []byte
	next atomic.Int64
}

const floorPoolBytes = 64 << 20

func newFloor(maxBytes int) *floor {
	f := &floor{pool: make([]byte, max(floorPoolBytes, 2*maxBytes))}
	rand.Read(f.pool)
	return f
}

func (f *floor) Fetch(_ context.Context, req *tierdpb.FetchRequest) (*tierdpb.FetchResponse, error) {
	n := int64(min(int(req.MaxBytes), len(f.pool)/2))
	off := f.next.Add(n) % (int64(len(f.pool)) - n)
	return &tierdpb.FetchResponse{Records: f.pool[off : off+n], NextOffset: req.Offset + 1}, nil
}

// slowBucket adds a fixed delay before every GET: an object store's
// first-byte latency.
type slowBucket struct {
	rsm.Bucket
	delay time.Duration
}

func (b *slowBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	select {
	case <-time.After(b.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.Bucket.GetRange(ctx, key, off, length)
}
