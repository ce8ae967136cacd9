package copier

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/minio"
)

// heldOf returns the partitions the last pass held, with their hold
// reasons, from Status.
func heldOf(c *Copier) map[remotelog.TopicPartition]string {
	out := map[remotelog.TopicPartition]string{}
	for _, p := range c.Status().Partitions {
		if p.Reason == remotelog.WaitHeld {
			out[remotelog.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.Held
		}
	}
	return out
}

// logRec is one log record with its attributes as strings.
type logRec struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// logRecorder is a slog.Handler that keeps every record, and sends each
// to notify when set (without blocking).
type logRecorder struct {
	mu     sync.Mutex
	recs   []logRec
	notify chan logRec
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.mu.Unlock()
	if l.notify != nil {
		select {
		case l.notify <- rec:
		default:
		}
	}
	return nil
}

// with returns the records whose message contains msg.
func (l *logRecorder) with(msg string) []logRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRec
	for _, r := range l.recs {
		if strings.Contains(r.msg, msg) {
			out = append(out, r)
		}
	}
	return out
}

// observe gives the rig's copier a recording logger and a registry of its
// own (opts add to them).
func (r *rig) observe(opts ...Option) (*logRecorder, *prometheus.Registry) {
	r.t.Helper()
	logs, reg := &logRecorder{}, prometheus.NewRegistry()
	opts = append([]Option{WithClock(func() time.Time { return r.now }), WithLogger(slog.New(logs)), WithRegisterer(reg)}, opts...)
	c, err := New(r.c.cfg, r.store, r.mgr, opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.c = c
	return logs, reg
}

// status returns the status of one partition.
func (r *rig) status(tp remotelog.TopicPartition) remotelog.PartitionStatus {
	r.t.Helper()
	for _, p := range r.c.Status().Partitions {
		if p.Topic == tp.Topic && p.Partition == tp.Partition {
			return p
		}
	}
	r.t.Fatalf("no status for %s in %+v", tp, r.c.Status())
	return remotelog.PartitionStatus{}
}

func writeCheckpoint(t *testing.T, logDir string, entries ...string) {
	t.Helper()
	writeFile(t, filepath.Join(logDir, kafkalog.ReplicationOffsetCheckpointFile),
		fmt.Sprintf("0\n%d\n%s", len(entries), strings.Join(append(entries, ""), "\n")))
}

// TestStatusSaysWhyItWaits: a partition missing from the checkpoint waits
// for that reason (and is warned about once), then for the high
// watermark, then is up to date; every pass logs one debug line for it
// saying what it decided.
func TestStatusSaysWhyItWaits(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	logs, _ := r.observe()
	ts := r.now.UnixMilli()
	s0 := writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 100)
	s1 := writeSegment(t, r.dir(), 10, seq(10, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 20, nil, nil, 0)
	writeCheckpoint(t, r.logDir, "orders 1 50") // another partition only

	for pass := 0; pass < 2; pass++ {
		r.sync()
		st := r.status(r.tp)
		if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitNotInCheckpoint || st.PendingSegments != 2 || st.PendingBytes != s0+s1 ||
			st.HighWatermark != 0 || !strings.Contains(st.Detail, "no entry in the log dir's "+filepath.Join(r.logDir, kafkalog.ReplicationOffsetCheckpointFile)) {
			t.Fatalf("pass %d: status %+v", pass, st)
		}
	}
	if w := logs.with("not in the log dir's replication-offset-checkpoint"); len(w) != 1 || w[0].level != slog.LevelWarn || w[0].attrs["partition"] != "orders-0" {
		t.Fatalf("checkpoint warnings %+v, want one", w)
	}

	writeCheckpoint(t, r.logDir, "orders 0 15")
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d with high watermark 15", n)
	}
	st := r.status(r.tp)
	if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitHighWatermark || st.PendingSegments != 1 || st.PendingBytes != s1 ||
		!strings.Contains(st.Detail, "high watermark 15") || !strings.Contains(st.Detail, "last offset 19") {
		t.Fatalf("status %+v", st)
	}

	writeCheckpoint(t, r.logDir, "orders 0 20")
	r.sync()
	st = r.status(r.tp)
	if st.State != remotelog.TierUpToDate || st.Reason != "" || st.PendingSegments != 0 || st.RemoteSegments != 2 || st.RemoteBytes != s0+s1 ||
		st.LogStartOffset != 0 || st.HighestTieredOffset != 19 || st.LocalLogStartOffset != 0 || st.ActiveBaseOffset != 20 ||
		st.LocalSegments != 3 || st.LastCopyMs != ts || st.MetadataRows != 2 || !strings.Contains(st.Detail, "active segment (base offset 20)") {
		t.Fatalf("status %+v", st)
	}
	decided := logs.with("partition pass decided")
	want := []string{"waiting", "waiting", "waiting", "up_to_date"}
	if len(decided) != len(want) {
		t.Fatalf("%d decision lines for 4 passes: %+v", len(decided), decided)
	}
	for i, d := range decided {
		if d.level != slog.LevelDebug || d.attrs["partition"] != "orders-0" || d.attrs["state"] != want[i] || d.attrs["detail"] == "" {
			t.Errorf("decision %d: %+v, want state %s", i, d, want[i])
		}
	}
	if s := r.c.Status(); s.Passes != 4 || s.LastSuccessMs != ts || !s.Running {
		t.Errorf("passes %d, last success %d", s.Passes, s.LastSuccessMs)
	}
}

// TestStatusCorruptSegment: a segment failing its CRC stops tiering of the
// partition, and the status names the segment and the byte position.
func TestStatusCorruptSegment(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	ts := r.now.UnixMilli()
	writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 100)
	size := writeSegment(t, r.dir(), 10, seq(10, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 20, seq(20, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 30, nil, nil, 0)
	batchBytes := size / 10
	p := filepath.Join(r.dir(), kafkalog.FileName(10, kafkalog.LogSuffix))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[3*batchBytes+batchBytes-1] ^= 0xff // the last value byte of the fourth batch
	writeFile(t, p, string(data))
	if n, err := r.c.Sync(context.Background()); n != 1 || err == nil {
		t.Fatalf("copied %d, err %v", n, err)
	}
	st := r.status(r.tp)
	if want := fmt.Sprintf("segment 10 is corrupt at byte %d", 3*batchBytes); st.State != remotelog.TierWaiting ||
		st.Reason != remotelog.WaitCorruptSegment || !strings.Contains(st.Detail, want) || st.PendingSegments != 2 || st.Error == "" {
		t.Fatalf("status %+v, want %q", st, want)
	}
}

// TestStatusHeldAndRemoteOnly: a held partition waits with its hold
// reason; a partition whose directory went has remote copies only.
func TestStatusHeldAndRemoteOnly(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	ts := r.now.UnixMilli()
	size := writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	r.sync()
	writeFile(t, filepath.Join(r.dir(), kafkalog.PartitionMetadataFile), "not what a broker writes")
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("a held partition's pass had no error")
	}
	st := r.status(r.tp)
	if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitHeld || st.Held != heldPartitionMetadata || !strings.Contains(st.Detail, "neither tiers") {
		t.Fatalf("status %+v", st)
	}
	if err := os.RemoveAll(r.dir()); err != nil {
		t.Fatal(err)
	}
	r.sync()
	st = r.status(r.tp)
	if st.State != remotelog.TierRemoteOnly || st.RemoteBytes != size || st.RemoteSegments != 1 || st.Dir != "" || st.LocalSegments != 0 {
		t.Fatalf("status %+v", st)
	}
}

// TestStatusLeaseHeld: the tierd without the lease says which tierd holds
// it, and reports no lag for the partition (the holder does).
func TestStatusLeaseHeld(t *testing.T) {
	a := leaseRig(t, nil, 1)
	b := leaseRig(t, a.bucket, 2)
	_, reg := b.observe()
	a.sync()
	b.sync()
	st := b.status(b.tp)
	if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitLeaseHeld || !strings.Contains(st.Detail, a.c.cfg.InstanceID) ||
		!strings.Contains(st.Detail, "broker_id 1") {
		t.Fatalf("status %+v", st)
	}
	if v, ok := metricValue(t, reg, "tierd_remote_copy_lag_bytes", map[string]string{"topic": "orders", "partition": "0"}); ok {
		t.Fatalf("copy lag %v reported by the tierd without the lease", v)
	}
	if v, _ := metricValue(t, reg, "tierd_copier_partitions_waiting", map[string]string{"reason": "lease_held"}); v != 1 {
		t.Fatalf("waiting for lease_held: %v", v)
	}
}

// TestStatusStoreUnreachable: with the object store down (nothing listens
// at its endpoint), the partition waits for the store, saying why.
func TestStatusStoreUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "k") // no IAM lookup
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	mc := minio.DefaultConfig()
	mc.Endpoint, mc.Bucket, mc.Insecure, mc.MaxRetries = addr, "tierd", true, 1
	b, err := minio.New(mc, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.OwnershipLease = 0
	r := newRig(t, cfg, b)
	writeSegment(t, r.dir(), 0, seq(0, 10), same(r.now.UnixMilli(), 10), 100)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("no error with the store down")
	}
	st := r.status(r.tp)
	if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitStoreUnreachable || !strings.Contains(st.Detail, "did not answer") ||
		st.PendingSegments != 1 {
		t.Fatalf("status %+v", st)
	}
	if s := r.c.Status(); s.LastSuccessMs != -1 || s.LastPassMs != r.now.UnixMilli() {
		t.Fatalf("a failed pass counted as a success: %+v", s)
	}
}

// TestEvaluateStopped: over a stopped tierd's files and metadata, the
// status says what waits for it without touching anything.
func TestEvaluateStopped(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	ts := r.now.UnixMilli()
	writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	r.sync()
	s1 := writeSegment(t, r.dir(), 10, seq(10, 10), same(ts, 10), 100)
	writeSegment(t, r.dir(), 20, nil, nil, 0)
	before := r.objects()
	s, err := Evaluate(r.c.cfg, r.store, r.now)
	if err != nil {
		t.Fatal(err)
	}
	if s.Running || len(s.Partitions) != 1 {
		t.Fatalf("status %+v", s)
	}
	st := s.Partitions[0]
	if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitNotRunning || st.PendingSegments != 1 || st.PendingBytes != s1 || st.RemoteSegments != 1 {
		t.Fatalf("status %+v", st)
	}
	if after := r.objects(); len(after) != len(before) {
		t.Fatalf("evaluate wrote to the bucket: %v", after)
	}
}
