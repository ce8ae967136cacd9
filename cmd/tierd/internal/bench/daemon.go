package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tierd/tierd/grpcapi"
)

// daemon is a "tierd run" child process serving the bench's partition, so
// that the memory case measures tierd alone.
type daemon struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{} // closed when the child has exited
	client *grpcapi.Client
	// metricsURL is the child's /metrics; httpURL its http.listen.
	metricsURL, httpURL string
	// closeProxy stops the store latency proxy (nil when there is none).
	closeProxy func()
}

// lockedBuffer collects the child's output, written by exec's copying
// goroutine and read by the bench.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDaemon stops the in-process server's metadata store (the child
// needs its lock), writes a tierd.yaml for the same bucket, metadata and
// log dir, and starts bin run with it, with memory_limit_bytes (the Go
// soft memory limit) limit: -2 for the fetch caches' budgets + 32 MiB
// (the copier has nothing to upload here), else as tierd.yaml has it.
func (e *env) startDaemon(ctx context.Context, bin string, limit int64) (*daemon, error) {
	e.closeServer()
	return e.startChildRetrying(ctx, bin, limit, nil)
}

// startChildRetrying is startChild, tried again (three times in all) on
// ports picked anew when the child could not bind one: the ports were
// free when picked, but an outgoing connection of the bench, MinIO or
// another process may take one as its local port before the child binds
// it. With rsm, a port of its own is kept (the caller named it) only when
// it was given.
func (e *env) startChildRetrying(ctx context.Context, bin string, limit int64, rc *rsmChild) (*daemon, error) {
	picked := rc != nil && rc.addr == ""
	for attempt := 1; ; attempt++ {
		d, err := e.startChild(ctx, bin, limit, rc)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return d, err
		}
		if picked {
			rc.addr = ""
		}
	}
}

// startChild starts a "tierd run" child on ports picked anew: with rsm
// nil, the copier and fetch server over the bench's log dir and metadata;
// else the RSM endpoint alone (no copier log dirs) over rsm's metadata
// dir, the bench's log dir as the broker's, on rsm.addr (picked here when
// empty). It returns once the child serves (and, with rsm, answers the
// RSM endpoint's health check).
func (e *env) startChild(ctx context.Context, bin string, limit int64, rc *rsmChild) (*daemon, error) {
	lis, err := listen()
	if err != nil {
		return nil, err
	}
	addr := lis.Addr().String()
	lis.Close()
	hlis, err := listen()
	if err != nil {
		return nil, err
	}
	httpAddr := hlis.Addr().String()
	hlis.Close()
	if rc != nil && rc.addr == "" {
		rlis, err := listen()
		if err != nil {
			return nil, err
		}
		rc.addr = rlis.Addr().String()
		rlis.Close()
	}
	endpoint, closeProxy := e.endpoint, func() {}
	if e.cfg.StoreLatency > 0 { // the child's GETs wait as the bench's own do
		if endpoint, closeProxy, err = latencyProxy(e.endpoint, e.cfg.StoreLatency); err != nil {
			return nil, err
		}
	}
	if limit == -2 {
		limit = e.fcfg.MemoryBytes() + 32<<20
	}
	copierYAML := fmt.Sprintf(`copier:
  log_dirs: [%q]
  remote.log.manager.task.interval.ms: 3600000
  remote.log.manager.copier.thread.pool.size: 1
  ownership_lease: 0s
`, filepath.Join(e.dir, "logs"))
	metaDir := filepath.Join(e.dir, "metadata")
	if rc != nil {
		copierYAML, metaDir = rc.yaml(filepath.Join(e.dir, "logs")), rc.metaDir
	}
	bucketType := e.cfg.ChildBucketType
	if bucketType == "" {
		bucketType = "s3"
	}
	yaml := fmt.Sprintf(`%sbucket:
  type: %s
  prefix: %q
  %s: {endpoint: %q, bucket: %q, region: %q, path_style: true}
metadata:
  dir: %q
fetch:
  listen: %q
  fetch.max.bytes: %d
  remote.fetch.chunk.bytes: %d
  remote.fetch.chunk.cache.memory.bytes: %d
  remote.fetch.max.inflight.gets: %d
  remote.fetch.prefetch.max.bytes: %d
  remote.log.index.file.cache.total.size.bytes: %d
  remote.fetch.max.wait.ms: %d
http:
  listen: %q
  pprof: %t
memory_limit_bytes: %d
log_level: warn
`, copierYAML, bucketType, e.prefix, bucketType, endpoint, e.cfg.Bucket, e.cfg.Region, metaDir, addr,
		e.fcfg.FetchMaxBytes, e.fcfg.Cache.ChunkBytes, e.fcfg.Cache.MemoryBytes, e.fcfg.Cache.MaxInflightGets,
		e.fcfg.PrefetchBytes, e.fcfg.IndexCacheBytes, e.fcfg.MaxWaitMs, httpAddr, e.cfg.ProfileDir != "", limit)
	path := filepath.Join(e.dir, "tierd.yaml")
	if rc != nil {
		path = filepath.Join(e.dir, "tierd-rsm.yaml")
	}
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		closeProxy()
		return nil, err
	}
	d := &daemon{out: &lockedBuffer{}, exited: make(chan struct{}), metricsURL: "http://" + httpAddr + "/metrics", httpURL: "http://" + httpAddr, closeProxy: closeProxy}
	d.cmd = exec.Command(bin, "run", "--config", path)
	d.cmd.Env = append(os.Environ(), "GOMEMLIMIT=") // tierd's own rule, not the caller's
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // goes with the bench
	if err := d.cmd.Start(); err != nil {
		closeProxy()
		return nil, fmt.Errorf("start %s run: %w", bin, err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	if d.client, err = grpcapi.Dial(addr); err != nil {
		d.stop()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		ok := d.client.WaitReady(wctx)
		cancel()
		if ok && rc != nil {
			ok = rc.healthy()
		}
		if ok {
			return d, nil
		}
		select {
		case <-d.exited:
			d.stop()
			return nil, fmt.Errorf("tierd run exited before serving %s: %s", addr, d.out.String())
		default:
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("tierd run did not serve %s within 30s: %s", addr, d.out.String())
		}
		d.client.Close()
		if d.client, err = grpcapi.Dial(addr); err != nil {
			d.stop()
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (d *daemon) stop() {
	if d.client != nil {
		d.client.Close()
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
	d.closeProxy()
}

// latencyProxy serves a reverse proxy of the S3 endpoint target on
// 127.0.0.1 that holds every GET for delay before passing it on (the
// bench's own GETs wait in slowBucket): --store-latency for a child
// tierd. The Host header passes unchanged, so S3 signatures made for the
// proxy's address verify. It returns the proxy's URL and its stop.
func latencyProxy(target string, delay time.Duration) (string, func(), error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	})
	lis, err := listen()
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(lis)
	return "http://" + lis.Addr().String(), func() { srv.Close() }, nil
}
