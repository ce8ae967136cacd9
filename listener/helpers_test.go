package listener

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// testServer is a listener on 127.0.0.1 serving a fake Log.
type testServer struct {
	addr string
	srv  *Server
	reg  *prometheus.Registry
	log  *fakeLog
	logs *syncWriter // the server's log lines
}

// startServer serves l on a fresh port until the test ends; mod edits the
// default config.
func startServer(t testing.TB, l *fakeLog, mod func(*Config), opts ...Option) *testServer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	if mod != nil {
		mod(&cfg)
	}
	reg := prometheus.NewRegistry()
	logs := &syncWriter{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := New(cfg, l, append([]Option{WithRegisterer(reg), WithLogger(logger), WithNodeID(7), WithClusterID("tierd-test")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{addr: lis.Addr().String(), srv: srv, reg: reg, log: l, logs: logs}
}

// closed returns tierd_kafka_connections_closed_total{reason}.
func (ts *testServer) closed(reason string) float64 {
	return testutil.ToFloat64(ts.srv.m.closed.WithLabelValues(reason))
}

// waitFor polls cond until it holds; the test fails after 20 s (a guard
// against hanging, not a timing assertion).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}

// fixturePart is one real Kafka partition log served by the fake Log.
type fixturePart struct {
	tp   TopicPartition
	path string
	want []batch.Record // data records (control batches left out), by offset
}

// loadFixtures serves every .log of the real fixtures (one topic per
// partition directory: "<set>.<dirs>.<topic>", partition as in its
// directory name) and returns what each holds.
func loadFixtures(t testing.TB, l *fakeLog) []fixturePart {
	t.Helper()
	root := testfixtures.Dir(t)
	var out []fixturePart
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return err
		}
		dir := filepath.Dir(path)
		tp, ok := kafkalog.ParsePartitionDir(filepath.Base(dir))
		if !ok {
			if tp, _, ok = kafkalog.ParseNonLivePartitionDir(filepath.Base(dir)); !ok {
				return nil
			}
		}
		rel, err := filepath.Rel(root, filepath.Dir(dir))
		if err != nil {
			return err
		}
		name := strings.ReplaceAll(rel, string(filepath.Separator), ".")
		name = strings.Map(func(r rune) rune {
			if r == '.' || r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '_'
		}, name+"."+tp.Topic)
		fp := fixturePart{tp: TopicPartition{name, tp.Partition}, path: path}
		fp.want = servePartitionLog(t, l, fp.tp, path)
		if eps, err := epoch.ReadFile(epoch.Path(dir)); err == nil {
			l.set(fp.tp.Topic, fp.tp.Partition, func(p *fakePart) {
				for _, e := range eps {
					p.epochs = append(p.epochs, EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset})
				}
			})
		}
		out = append(out, fp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 20 {
		t.Fatalf("only %d fixture logs under %s", len(out), root)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].tp.String() < out[j].tp.String() })
	return out
}

// servePartitionLog appends a .log file's entries to the fake Log and
// returns its data records.
func servePartitionLog(t testing.TB, l *fakeLog, tp TopicPartition, path string) []batch.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	l.part(tp.Topic, tp.Partition) // empty logs are partitions too
	var want []batch.Record
	s := batch.NewScanner(f, st.Size(), batch.ScanOptions{})
	for s.Next() {
		raw, err := s.Raw()
		if err != nil {
			t.Fatal(err)
		}
		l.appendRaw(t, tp.Topic, tp.Partition, raw)
		if b := s.Batch(); !b.Control {
			fe := l.topics[tp.Topic].parts[tp.Partition].entries
			want = append(want, fe[len(fe)-1].records...)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	l.set(tp.Topic, tp.Partition, func(p *fakePart) {
		if len(p.entries) > 0 {
			p.logStart = p.entries[0].base
		}
	})
	return want
}

// sameBytes compares two byte slices, null (nil) included.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

var errTestStorage = errors.New("test storage failure")

// counterValue returns tierd_kafka_requests_total{api, version}.
func counterValue(ts *testServer, api string, version int) float64 {
	return testutil.ToFloat64(ts.srv.m.requests.WithLabelValues(api, strconv.Itoa(version)))
}

// counterErr returns tierd_kafka_errors_total{api, code}.
func counterErr(ts *testServer, api, code string) float64 {
	return testutil.ToFloat64(ts.srv.m.errors.WithLabelValues(api, code))
}
