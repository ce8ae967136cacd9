// Package e2e drives tierd's real parts together: the embedded segment
// log, the copier, Pebble, a MinIO server on 127.0.0.1, and the gRPC fetch
// server on a real socket.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/seglog"
)

func value(off int64) []byte {
	v := bytes.Repeat([]byte{byte(off)}, 5000)
	copy(v, []byte("offset "+string(rune('0'+off%10))))
	return v
}

type world struct {
	t      *testing.T
	now    time.Time
	logDir string
	store  *rlmm.Store
	mgr    *rsm.Manager
	bucket rsm.Bucket
	client *grpcapi.Client
	tp     remotelog.TopicPartition
}

// copier returns a copier with the given retention over the world's parts
// (a new one per step stands for a config change and restart).
func (w *world) copier(r topics.Retention) *copier.Copier {
	cfg := copier.DefaultConfig()
	cfg.LogDirs, cfg.FileDeleteDelayMs, cfg.Retention = []string{w.logDir}, 0, topics.LogRetention(r)
	cfg.BrokerID, cfg.InstanceID = 1, "e2e"
	c, err := copier.New(cfg, w.store, w.mgr, copier.WithClock(func() time.Time { return w.now }))
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

func (w *world) sync(c *copier.Copier) {
	w.t.Helper()
	if _, err := c.Sync(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) offsets() remotelog.PartitionOffsets {
	o, _, err := w.store.Offsets(w.tp)
	if err != nil {
		w.t.Fatal(err)
	}
	return o
}

// checkBucket: every finished row's objects exist and match the manifest
// checksums; no object belongs to a deleted row.
func (w *world) checkBucket() {
	w.t.Helper()
	ctx := context.Background()
	rows, _ := w.store.Segments(w.tp)
	live := map[string]bool{}
	for _, r := range rows {
		if r.State != remotelog.CopySegmentFinished {
			continue
		}
		live[r.ID.String()] = true
		mf, err := w.mgr.ReadManifest(ctx, w.mgr.Key(r, ".manifest.json"))
		if err != nil {
			w.t.Fatalf("manifest of %s: %v", r.ID, err)
		}
		for _, o := range mf.Objects {
			if err := w.mgr.VerifyObject(ctx, o); err != nil {
				w.t.Fatalf("object %s: %v", o.Key, err)
			}
		}
	}
	w.bucket.Iter(ctx, "", func(k string) error {
		if _, id, _, ok := rsm.ParseKey(k); (!ok && path.Base(k) != rsm.OwnerObject && !rsm.IsHeartbeatKey(k)) || (ok && !live[id.String()]) {
			w.t.Errorf("object %s has no live row", k)
		}
		return nil
	})
}

func TestTieringOverMinIO(t *testing.T) {
	t.Parallel()
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "tierd-e2e")
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure, mcfg.PartSize = srv.Endpoint, "tierd-e2e", true, 5<<20
	b, err := minio.New(mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, now: time.Now(), logDir: t.TempDir(), bucket: b, tp: remotelog.TopicPartition{Topic: "orders", Partition: 0}}
	if w.store, err = rlmm.Open(rlmm.Config{Dir: filepath.Join(t.TempDir(), "rlmm")}); err != nil {
		t.Fatal(err)
	}
	defer w.store.Close()
	if w.mgr, err = rsm.NewManager(b, rsm.Config{Prefix: "cluster-a"}); err != nil {
		t.Fatal(err)
	}
	w.client = serveFetch(t, w.store, w.mgr)
	ctx := context.Background()

	// The embedded log rolls three segments: 4h, 150min and 90min old.
	dir := filepath.Join(w.logDir, "orders-0")
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = seglog.MinSegmentBytes
	log, err := seglog.Open(dir, scfg, seglog.WithRemote(w.client.Partition("orders", 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	ages := func(off int64) time.Duration {
		switch {
		case off < 206:
			return 4 * time.Hour
		case off < 412:
			return 150 * time.Minute
		}
		return 90 * time.Minute
	}
	for off := int64(0); off < 600; off++ {
		if _, err := log.Append(seglog.Record{Value: value(off), Timestamp: w.now.Add(-ages(off)).UnixMilli() + off}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Roll(); err != nil {
		t.Fatal(err)
	}

	// Step 1: copy, then local.retention.ms=1h deletes the local copies.
	hour := int64(3600 * 1000)
	w.sync(w.copier(topics.Retention{RetentionMs: ptr(5 * hour), LocalRetentionMs: ptr(hour)}))
	if o := w.offsets(); o.LogStartOffset != 0 || o.LocalLogStartOffset != 600 || o.HighestTieredOffset != 599 {
		t.Fatalf("after copy and local retention: %+v", o)
	}
	if got := log.LocalLogStartOffset(); got != 600 {
		t.Fatalf("embedded log's local log start offset %d, want 600", got)
	}
	w.checkBucket()

	// Step 2: every offset reads back through the embedded log, remotely.
	readAll(t, log, 0)
	off, ts, err := log.OffsetForTimestamp(w.now.Add(-150 * time.Minute).UnixMilli())
	if err != nil || off != 206 {
		t.Fatalf("by timestamp: %d (%d), %v; want 206", off, ts, err)
	}
	if lso, err := log.LogStartOffsetContext(ctx); err != nil || lso != 0 {
		t.Fatalf("log start offset %d %v", lso, err)
	}

	// Step 3: retention.ms=3h deletes the 4h-old copy; the log start offset
	// moves to 206 and reads below it are out of range.
	w.sync(w.copier(topics.Retention{RetentionMs: ptr(3 * hour), LocalRetentionMs: ptr(hour)}))
	if o := w.offsets(); o.LogStartOffset != 206 {
		t.Fatalf("after retention.ms: %+v", o)
	}
	w.checkBucket()
	var oor *grpcapi.OutOfRangeError
	if _, err := log.Read(100, 1000); !errors.As(err, &oor) || oor.LogStartOffset != 206 || oor.HighestTieredOffset != 599 {
		t.Fatalf("read below the log start offset: %v", err)
	}
	readAll(t, log, 206)

	// Step 4: retention.bytes at the size of the newest copy deletes the
	// oldest remaining copy (the log without it still holds that much) and
	// not the newest (the log without it would not: Kafka's rule); the log
	// start offset moves to 412.
	fresh := w.now.UnixMilli()
	for i := 0; i < 10; i++ {
		log.Append(seglog.Record{Value: []byte("new"), Timestamp: fresh})
	}
	fin, err := w.store.FinishedSegments(w.tp)
	if err != nil || len(fin) != 2 || fin[1].StartOffset != 412 {
		t.Fatalf("finished copies %v %v", fin, err)
	}
	w.sync(w.copier(topics.Retention{RetentionMs: ptr(3 * hour), RetentionBytes: ptr(fin[1].SizeInBytes), LocalRetentionMs: ptr(hour)}))
	if o := w.offsets(); o.LogStartOffset != 412 {
		t.Fatalf("after retention.bytes: %+v", o)
	}
	w.checkBucket()
	readAll(t, log, 412)
	resp, err := w.client.API().ListOffsets(ctx, &tierdpb.ListOffsetsRequest{Topic: "orders", Spec: tierdpb.OffsetSpec_EARLIEST})
	if err != nil || resp.Offset != 412 {
		t.Fatalf("earliest %v %v", resp, err)
	}
	rows, _ := w.store.Segments(w.tp)
	var states []string
	for _, r := range rows {
		states = append(states, r.State.String())
	}
	if strings.Join(states, ",") != "DELETE_SEGMENT_FINISHED,DELETE_SEGMENT_FINISHED,COPY_SEGMENT_FINISHED" {
		t.Fatalf("states %v", states)
	}
}

// readAll reads [from, 600) and checks every record.
func readAll(t *testing.T, log *seglog.Log, from int64) {
	t.Helper()
	for off := from; off < 600; {
		data, err := log.Read(off, 256<<10)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		recs, err := records(data)
		if err != nil || len(recs) == 0 {
			t.Fatalf("read %d: %d records, %v", off, len(recs), err)
		}
		for _, r := range recs {
			if r.Offset >= off && !bytes.Equal(r.Value, value(r.Offset)) {
				t.Fatalf("offset %d: wrong value", r.Offset)
			}
			off = r.Offset + 1
		}
	}
}

func records(data []byte) ([]batch.Record, error) {
	var out []batch.Record
	for p := 0; p < len(data); {
		b, err := batch.ParseHeader(data[p:], int64(p))
		if err != nil {
			return nil, err
		}
		recs, err := batch.Records(data[p:p+int(b.Size)], nil)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
		p += int(b.Size)
	}
	return out, nil
}

// serveFetch starts a fetch server over store and mgr on a real socket for
// the test and returns a client of it.
func serveFetch(t *testing.T, store remoteread.Metadata, mgr remoteread.Remote) *grpcapi.Client {
	t.Helper()
	srv, err := grpcapi.NewServer(grpcapi.DefaultConfig(), store, mgr)
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
	client, err := grpcapi.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); cancel(); <-done })
	return client
}
