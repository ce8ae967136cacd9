package e2e

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/logview"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
)

// kworld is a whole tierd wired in process, as "tierd run" wires it: one
// log dir, a bucket, real Pebble metadata, the copier (run pass by pass by
// the test), the fetch server's in-process read API, the view joining both
// tiers, and the Kafka listener on a real 127.0.0.1 socket.
type kworld struct {
	t      *testing.T
	logDir string
	store  *rlmm.Store
	mgr    *rsm.Manager
	fetch  *grpcapi.Server
	view   *logview.View
	srv    *listener.Server
	reg    *prometheus.Registry
	addr   string // the Kafka listener's bootstrap address
	logs   *lockedBuffer
}

// newKWorld starts a tierd over a fresh log dir and a filesystem bucket.
func newKWorld(t *testing.T) *kworld {
	t.Helper()
	b, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return newKWorldOn(t, b, t.TempDir())
}

// newKWorldOn starts a tierd over logDir and bucket b, with Pebble in
// memory. The listener serves until the test ends; its, the view's and the
// fetch server's log lines are printed when the test fails.
func newKWorldOn(t *testing.T, b rsm.Bucket, logDir string) *kworld {
	t.Helper()
	w := &kworld{t: t, logDir: logDir, reg: prometheus.NewRegistry(), logs: &lockedBuffer{}}
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tierd log lines:\n%s", w.logs.String())
		}
	})
	var err error
	if w.store, err = rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.store.Close() })
	if w.mgr, err = rsm.NewManager(b, rsm.Config{}); err != nil {
		t.Fatal(err)
	}
	if w.fetch, err = grpcapi.NewServer(grpcapi.DefaultConfig(), w.store, w.mgr, grpcapi.WithRegisterer(w.reg),
		grpcapi.WithLogger(logger.With("component", "fetch"))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.fetch.Close)
	vcfg := logview.DefaultConfig()
	vcfg.LogDirs = []string{logDir}
	if w.view, err = logview.New(vcfg, w.fetch.Engine(), logview.WithLogger(logger.With("component", "logview"))); err != nil {
		t.Fatal(err)
	}
	lcfg := listener.DefaultConfig()
	lcfg.Listen = "127.0.0.1:0"
	if w.srv, err = listener.New(lcfg, w.view, listener.WithRegisterer(w.reg), listener.WithNodeID(1), listener.WithClusterID("tierd-e2e"),
		listener.WithLogger(logger.With("component", "kafka-listener"))); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", lcfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	w.addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listener: %v", err)
		}
	})
	return w
}

// tier runs copier passes with retention r (retention.ms unlimited unless
// r sets it: the tests' timestamps are old) until a pass copies nothing,
// so every rolled segment is copied and local retention applied.
func (w *kworld) tier(r topics.Retention) {
	w.t.Helper()
	cfg := copier.DefaultConfig()
	cfg.LogDirs, cfg.FileDeleteDelayMs = []string{w.logDir}, 0
	cfg.BrokerID, cfg.InstanceID = 1, "e2e"
	if r.RetentionMs == nil {
		r.RetentionMs = ptr(-1)
	}
	cfg.Retention = topics.LogRetention(r)
	c, err := copier.New(cfg, w.store, w.mgr)
	if err != nil {
		w.t.Fatal(err)
	}
	for pass := 0; pass < 10; pass++ {
		n, err := c.Sync(context.Background())
		if err != nil {
			w.t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	w.t.Fatal("the copier still copied after 10 passes")
}

// offsets returns the partition's remote offsets (rlmm).
func (w *kworld) offsets(topic string, p int32) remotelog.PartitionOffsets {
	w.t.Helper()
	o, _, err := w.store.Offsets(remotelog.TopicPartition{Topic: topic, Partition: p})
	if err != nil {
		w.t.Fatal(err)
	}
	return o
}

// localLogs lists the live .log files of a partition directory by base
// offset.
func localLogs(t *testing.T, dir string) []int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, e := range ents {
		if f, ok := kafkalog.ParseFileName(e.Name()); ok && f.Suffix == kafkalog.LogSuffix {
			bases = append(bases, f.BaseOffset)
		}
	}
	return bases
}

// metricSum sums the samples of a counter whose label has one of values.
func (w *kworld) metricSum(name, label string, values ...string) float64 {
	w.t.Helper()
	mfs, err := w.reg.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && slices.Contains(values, l.GetValue()) {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// refused is how many connections the listener closed for a request it
// does not serve or cannot parse: a real client should cause none.
func (w *kworld) refused() float64 {
	return w.metricSum("tierd_kafka_connections_closed_total", "reason", "unsupported_request", "malformed_request")
}

// lockedBuffer collects log lines from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// copyDir copies the regular files of src into dst (created), leaving out
// names for which skip is true.
func copyDir(t *testing.T, src, dst string, skip func(name string) bool) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || (skip != nil && skip(e.Name())) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// isIndex says whether a segment file name is an offset or time index.
func isIndex(name string) bool {
	return strings.HasSuffix(name, kafkalog.IndexSuffix) || strings.HasSuffix(name, kafkalog.TimeIndexSuffix)
}
