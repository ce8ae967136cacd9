package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/seglog"
)

// writeSegsLog writes partition segs-0 of n rolled segments of one batch
// each (the first half stamped two days before now (ms), the rest now)
// and an empty active one, with checkpoint files saying all of it is
// committed, plus an empty partition segs-1. It returns the log dir.
func writeSegsLog(dir string, n int, now int64) (string, error) {
	logs := filepath.Join(dir, "logs")
	l, err := seglog.Open(filepath.Join(logs, segsTopic+"-0"), seglog.DefaultConfig())
	if err != nil {
		return "", err
	}
	for i := range n {
		ts := now
		if i < n/2 {
			ts = now - 2*dayMs
		}
		if _, err := l.AppendBatch(batch.CodecNone, segsRecords(ts)...); err == nil {
			err = l.Roll()
		}
		if err != nil {
			l.Close()
			return "", err
		}
	}
	if err := l.Close(); err != nil {
		return "", err
	}
	return logs, writeSegsCheckpoints(logs, n)
}

// segsSide is one way of making the copies: its log dir, store, bucket.
type segsSide struct {
	logs string
	b    *rsm.CountingBucket
	mgr  *rsm.Manager
	st   *rlmm.Store
}

// copierSide makes n copies the way scale_segments used to: the
// embedded log writes n rolled segments, and the copier copies them and
// drops their local files.
func copierSide(t *testing.T, e *env, kind string, n int, now int64) segsSide {
	t.Helper()
	dir := filepath.Join(e.dir, "copier-"+kind)
	logs, err := writeSegsLog(dir, n, now)
	if err != nil {
		t.Fatal(err)
	}
	b, mgr, err := e.scaleBucket(kind, dir, "copier-"+kind)
	if err != nil {
		t.Fatal(err)
	}
	var syncs atomic.Int64
	st, err := metaStore(filepath.Join(dir, "metadata"), &syncs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := segsCopier(logs, st, mgr, -1)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // copies, then drops the local files
		if _, err := c.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := settleSegs(context.Background(), logs, st, mgr, n); err != nil {
		t.Fatalf("copier-made: %v", err)
	}
	return segsSide{logs, b, mgr, st}
}

// seedSide makes n copies as segsStep does.
func seedSide(t *testing.T, e *env, kind string, n int, now int64) segsSide {
	t.Helper()
	dir := filepath.Join(e.dir, "seed-"+kind)
	b, mgr, err := e.scaleBucket(kind, dir, "seed-"+kind)
	if err != nil {
		t.Fatal(err)
	}
	logs, meta := filepath.Join(dir, "logs"), filepath.Join(dir, "metadata")
	if err := seedSegs(context.Background(), dir, logs, meta, mgr, segsConfig(logs, -1), n, now); err != nil {
		t.Fatal(err)
	}
	var syncs atomic.Int64
	st, err := metaStore(meta, &syncs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := settleSegs(context.Background(), logs, st, mgr, n); err != nil {
		t.Fatalf("seeded: %v", err)
	}
	return segsSide{logs, b, mgr, st}
}

// rows returns the rows of the partition with what differs between any
// two copies of the same bytes (the segment id, the time of the row's
// last write) blanked.
func (s segsSide) rows(t *testing.T, tp remotelog.TopicPartition) []remotelog.SegmentMetadata {
	t.Helper()
	rows, err := s.st.Segments(tp)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		rows[i].ID, rows[i].EventTimestampMs = remotelog.SegmentID{}, 0
	}
	return rows
}

// objects returns the partition's objects keyed by base offset and
// suffix (the key without the prefix and the segment id), manifests
// with their segment id, creation time and object keys blanked.
func (s segsSide) objects(t *testing.T) map[string]string {
	t.Helper()
	tp := remotelog.TopicPartition{Topic: segsTopic, Partition: 0}
	out := map[string]string{}
	for k, v := range rsmtest.Snapshot(t, s.mgr.Bucket(), s.mgr.PartitionPrefix(tp)) {
		base, _, suffix, ok := rsm.ParseKey(k)
		if !ok {
			t.Fatalf("object %s is not a copy's", k)
		}
		if strings.HasSuffix(suffix, ".manifest.json") {
			mf, err := s.mgr.ReadManifest(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			mf.SegmentID, mf.CreatedMs = remotelog.SegmentID{}, 0
			for sfx, o := range mf.Objects {
				o.Key = ""
				mf.Objects[sfx] = o
			}
			v = fmt.Sprintf("%+v", *mf)
		}
		out[fmt.Sprintf("%020d%s", base, suffix)] = v
	}
	return out
}

// Seeded copies are indistinguishable to readers from copier-made ones,
// on the filesystem bucket and on a real MinIO: the same rows (ids and
// write times aside) and partition offsets, the same objects with the
// same bytes and manifests, the same "tierd segments" listing from the
// fetch server, every offset fetched back byte for byte the same, and a
// retention pass deleting exactly the older half, rows and objects, on
// both.
func TestSeedMatchesCopier(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "bench")
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure = srv.Endpoint, "bench", true
	mb, err := minio.New(mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"filesystem", "minio"} {
		t.Run(kind, func(t *testing.T) {
			e := scaleEnv(t)
			e.prefix = "seed-test-" + kind
			if e.rec, err = rsm.ClaimPrefix(context.Background(), mb, e.prefix); err != nil {
				t.Fatal(err)
			}
			checkSeedMatches(t, e, kind, 10)
		})
	}
}

func checkSeedMatches(t *testing.T, e *env, kind string, n int) {
	ctx := context.Background()
	now := time.Now().UnixMilli() // both sides stamp the same times
	cs, ss := copierSide(t, e, kind, n, now), seedSide(t, e, kind, n, now)
	tp, other := remotelog.TopicPartition{Topic: segsTopic, Partition: 0}, remotelog.TopicPartition{Topic: segsTopic, Partition: 1}

	for _, p := range []remotelog.TopicPartition{tp, other} {
		if c, s := cs.rows(t, p), ss.rows(t, p); !reflect.DeepEqual(c, s) || (p == tp && len(c) != n) {
			t.Errorf("%s rows:\ncopier %+v\nseeded %+v", p, c, s)
		}
		co, cok, cerr := cs.st.Offsets(p)
		so, sok, serr := ss.st.Offsets(p)
		if co != so || !cok || !sok || cerr != nil || serr != nil {
			t.Errorf("%s offsets: copier %+v %v %v, seeded %+v %v %v", p, co, cok, cerr, so, sok, serr)
		}
	}
	co, so := cs.objects(t), ss.objects(t)
	if len(co) != 5*n || !reflect.DeepEqual(co, so) {
		t.Errorf("objects: copier %d, seeded %d; differing:", len(co), len(so))
		for k := range co {
			if co[k] != so[k] {
				t.Errorf("  %s: copier %.200q, seeded %.200q", k, co[k], so[k])
			}
		}
	}

	servers := map[string]*grpcapi.Server{}
	for name, s := range map[string]segsSide{"copier": cs, "seeded": ss} {
		fcfg := grpcapi.DefaultConfig()
		fcfg.Listen = "127.0.0.1:0"
		srv, err := grpcapi.NewServer(fcfg, s.st, s.mgr, grpcapi.WithRegisterer(prometheus.NewRegistry()))
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		servers[name] = srv
	}
	list := func(name string) *tierdpb.ListSegmentsResponse {
		resp, err := servers[name].ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: segsTopic, Partition: 0})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.Segments {
			m.SegmentId, m.EventTimestampMs = "", 0
		}
		return resp
	}
	if c, s := list("copier"), list("seeded"); !proto.Equal(c, s) || len(c.Segments) != n {
		t.Errorf("tierd segments:\ncopier %v\nseeded %v", c, s)
	}
	for off := int64(0); off < int64(n)*16; off++ {
		req := &tierdpb.FetchRequest{Topic: segsTopic, Partition: 0, Offset: off, MaxBytes: 1 << 20}
		cr, cerr := servers["copier"].Fetch(ctx, req)
		sr, serr := servers["seeded"].Fetch(ctx, req)
		if cerr != nil || serr != nil {
			t.Fatalf("fetch at %d: copier %v, seeded %v", off, cerr, serr)
		}
		if len(sr.Records) == 0 || !bytes.Equal(cr.Records, sr.Records) || cr.NextOffset != sr.NextOffset || sr.NextOffset != off/16*16+16 {
			t.Fatalf("fetch at %d: copier %d bytes to %d, seeded %d bytes to %d", off, len(cr.Records), cr.NextOffset, len(sr.Records), sr.NextOffset)
		}
	}

	for name, s := range map[string]segsSide{"copier": cs, "seeded": ss} {
		rc, err := segsCopier(s.logs, s.st, s.mgr, dayMs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rc.Sync(ctx); err != nil {
			t.Fatalf("%s: retention pass: %v", name, err)
		}
		fin, err := s.st.FinishedSegments(tp)
		if err != nil {
			t.Fatal(err)
		}
		var starts []int64
		for _, r := range fin {
			starts = append(starts, r.StartOffset)
		}
		sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
		if len(starts) != n-n/2 || starts[0] != int64(n/2)*16 {
			t.Errorf("%s: after retention, copies at %v; want the newer %d from %d", name, starts, n-n/2, n/2*16)
		}
		objs := s.objects(t)
		for k := range objs {
			if k < fmt.Sprintf("%020d", n/2*16) {
				t.Errorf("%s: object %s of a deleted copy is left", name, k)
			}
		}
		if len(objs) != 5*(n-n/2) {
			t.Errorf("%s: %d objects left, want %d", name, len(objs), 5*(n-n/2))
		}
	}
	if c, s := cs.rows(t, tp), ss.rows(t, tp); !reflect.DeepEqual(c, s) {
		t.Errorf("rows after retention:\ncopier %+v\nseeded %+v", c, s)
	}
	if c, s := cs.objects(t), ss.objects(t); !reflect.DeepEqual(c, s) {
		t.Errorf("objects after retention differ: copier %d, seeded %d", len(c), len(s))
	}
}
