package copier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	dto "github.com/prometheus/client_model/go"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// writeSegment writes a segment as a broker leaves a rolled one: a .log of
// one-record batches at the given offsets with the given timestamps, an
// empty .index and a .timeindex holding the max timestamp. It returns the
// .log size.
func writeSegment(t testing.TB, dir string, base int64, offsets, timestamps []int64, valueSize int) int64 {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var log []byte
	maxTS, maxOff := int64(-1), base
	for i, off := range offsets {
		var err error
		log, err = batch.AppendBatch(log, batch.NewParams(off, 0), []batch.Record{{Timestamp: timestamps[i], Value: bytes.Repeat([]byte{'v'}, valueSize)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if timestamps[i] > maxTS {
			maxTS, maxOff = timestamps[i], off
		}
	}
	write := func(suffix string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, suffix)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(kafkalog.LogSuffix, log)
	write(kafkalog.IndexSuffix, nil)
	var ti []byte
	if maxTS >= 0 {
		ti, _ = index.AppendTimeEntry(nil, base, index.TimeEntry{Timestamp: maxTS, Offset: maxOff})
	}
	write(kafkalog.TimeIndexSuffix, ti)
	return int64(len(log))
}

// seq returns n consecutive offsets from start.
func seq(start int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = start + int64(i)
	}
	return out
}

func same(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// rig is a copier over a real (in-memory FS) Pebble store and a bucket.
type rig struct {
	t      *testing.T
	logDir string
	store  *rlmm.Store
	bucket rsm.Bucket
	mgr    *rsm.Manager
	c      *Copier
	now    time.Time
	tp     remotelog.TopicPartition
}

func newRig(t *testing.T, cfg Config, b rsm.Bucket) *rig {
	t.Helper()
	r := &rig{t: t, logDir: t.TempDir(), bucket: b, now: time.UnixMilli(1_700_000_000_000), tp: remotelog.TopicPartition{Topic: "orders", Partition: 0}}
	if b == nil {
		r.bucket = memory.New()
	}
	var err error
	if r.store, err = rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem()), rlmm.WithClock(func() time.Time { return r.now })); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.store.Close() })
	if r.mgr, err = rsm.NewManager(r.bucket, rsm.Config{Prefix: "tierd"}); err != nil {
		t.Fatal(err)
	}
	cfg.LogDirs = []string{r.logDir}
	if cfg.BrokerID == -1 {
		cfg.BrokerID = 0
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = fmt.Sprintf("instance-%d", rigs.Add(1)) // each rig is a tierd of its own
	}
	if cfg.TaskIntervalMs == 0 {
		d := DefaultConfig()
		cfg.TaskIntervalMs, cfg.CopyTimeout, cfg.Retention = d.TaskIntervalMs, d.CopyTimeout, d.Retention
	}
	if r.c, err = New(cfg, r.store, r.mgr, WithClock(func() time.Time { return r.now })); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) dir() string { return filepath.Join(r.logDir, r.tp.String()) }

func (r *rig) sync() int {
	r.t.Helper()
	n, err := r.c.Sync(context.Background())
	if err != nil {
		r.t.Fatalf("sync: %v", err)
	}
	return n
}

// localBases lists the live local segments.
func (r *rig) localBases() []int64 {
	segs, err := listSegments(r.dir())
	if err != nil {
		r.t.Fatal(err)
	}
	var out []int64
	for _, s := range segs {
		out = append(out, s.base)
	}
	return out
}

func (r *rig) states() map[remotelog.SegmentState]int {
	rows, err := r.store.Segments(r.tp)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[remotelog.SegmentState]int{}
	for _, row := range rows {
		out[row.State]++
	}
	return out
}

func (r *rig) offsets() remotelog.PartitionOffsets {
	o, _, err := r.store.Offsets(r.tp)
	if err != nil {
		r.t.Fatal(err)
	}
	return o
}

// objects lists the bucket's segment objects (not ownership leases,
// fences or instance heartbeats).
func (r *rig) objects() []string {
	var keys []string
	r.bucket.Iter(context.Background(), "", func(k string) error {
		if !strings.HasSuffix(k, "/"+rsm.OwnerObject) && !strings.HasSuffix(k, "/"+rsm.FenceObject) && !strings.Contains(k, "/"+rsm.HeartbeatsDir+"/") {
			keys = append(keys, k)
		}
		return nil
	})
	return keys
}

func ptr(v int64) *int64 { return &v }

var rigs atomic.Int64

// faultBucket fails uploads whose key contains failOn, a given number of
// times.
type faultBucket struct {
	rsm.Bucket
	mu     sync.Mutex
	failOn string
	fails  int
}

func (f *faultBucket) Upload(ctx context.Context, key string, rd io.Reader, size int64) error {
	f.mu.Lock()
	fail := f.fails > 0 && strings.Contains(key, f.failOn)
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if fail {
		io.Copy(io.Discard, io.LimitReader(rd, 10))
		return errors.New("injected: 503 SlowDown")
	}
	return f.Bucket.Upload(ctx, key, rd, size)
}

func testutilCounter(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
