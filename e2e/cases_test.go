package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/memory"
	"github.com/tierd/tierd/seglog"
)

// local is a quick world: filesystem bucket, in-memory Pebble, a fetch
// server on a real socket, one partition "t-0".
type local struct {
	t      *testing.T
	logDir string
	dir    string
	store  *rlmm.Store
	mgr    *rsm.Manager
	api    tierdpb.RemoteFetchClient
	client *grpcapi.Client
	tp     remotelog.TopicPartition
}

func newLocal(t *testing.T) *local {
	t.Helper()
	b, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return newLocalOn(t, b)
}

func newLocalOn(t *testing.T, b rsm.Bucket) *local {
	t.Helper()
	w := &local{t: t, logDir: t.TempDir(), tp: remotelog.TopicPartition{Topic: "t", Partition: 0}}
	w.dir = filepath.Join(w.logDir, "t-0")
	var err error
	if w.store, err = rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.store.Close() })
	if w.mgr, err = rsm.NewManager(b, rsm.Config{}); err != nil {
		t.Fatal(err)
	}
	w.client = serveFetch(t, w.store, w.mgr)
	w.api = w.client.API()
	return w
}

func (w *local) copier(mod func(*copier.Config)) *copier.Copier {
	cfg := copier.DefaultConfig()
	cfg.LogDirs, cfg.FileDeleteDelayMs = []string{w.logDir}, 0
	cfg.BrokerID, cfg.InstanceID = 1, "e2e"
	cfg.Retention.RetentionMs = ptr(-1) // test timestamps are from 1970
	if mod != nil {
		mod(&cfg)
	}
	c, err := copier.New(cfg, w.store, w.mgr)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

func (w *local) open(opts ...seglog.Option) *seglog.Log {
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(w.dir, cfg, append(opts, seglog.WithRemote(w.client.Partition("t", 0)))...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { l.Close() })
	return l
}

func firstBatch(t *testing.T, data []byte) batch.Batch {
	t.Helper()
	b, err := batch.ParseHeader(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Case 6: a .timeindex preallocated to full size with three real entries:
// only the entries go up, and a timestamp between entries scans to the
// right offset.
func TestCasePreallocatedTimeIndex(t *testing.T) {
	t.Parallel()
	w := newLocal(t)
	os.MkdirAll(w.dir, 0o755)
	var log []byte
	var times []index.TimeEntry
	for off := int64(0); off < 30; off++ {
		var err error
		pos := int64(len(log))
		log, err = batch.AppendBatch(log, batch.NewParams(off, 0), []batch.Record{{Timestamp: 1000 + 10*off, Value: make([]byte, 300)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if off == 9 || off == 19 || off == 29 {
			times = append(times, index.TimeEntry{Timestamp: 1000 + 10*off, Offset: off})
		}
		_ = pos
	}
	ti, _ := index.EncodeTimes(0, times)
	ti = append(ti, make([]byte, 12*1000)...) // preallocated, never trimmed
	for name, data := range map[string][]byte{".log": log, ".index": make([]byte, 8*100), ".timeindex": ti} {
		os.WriteFile(filepath.Join(w.dir, kafkalog.FileName(0, name)), data, 0o644)
	}
	os.WriteFile(filepath.Join(w.dir, kafkalog.FileName(30, ".log")), nil, 0o644)
	if _, err := w.copier(nil).Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	fin, _ := w.store.FinishedSegments(w.tp)
	if len(fin) != 1 {
		t.Fatalf("finished %v", fin)
	}
	up, err := w.mgr.FetchIndex(context.Background(), fin[0], remotelog.TimeIndex)
	if err != nil || len(up) != 36 {
		t.Fatalf("uploaded time index: %d bytes, %v; want the 3 real entries", len(up), err)
	}
	for _, tc := range []struct{ ts, want int64 }{{1000, 0}, {1095, 10}, {1151, 16}, {1190, 19}, {1191, 20}, {1290, 29}} {
		r, err := w.api.ListOffsets(context.Background(), &tierdpb.ListOffsetsRequest{Topic: "t", Spec: tierdpb.OffsetSpec_TIMESTAMP, Timestamp: tc.ts})
		if err != nil || r.Offset != tc.want {
			t.Errorf("timestamp %d: offset %v, %v; want %d", tc.ts, r.GetOffset(), err, tc.want)
		}
	}
}

// Cases 9 and 10: a compacted segment (3, 50, 99) then a segment at 100
// with a compressed 10-record batch; reads inside gaps and inside the
// compressed batch return whole batches, locally and remotely.
func TestCaseGapsAndCompressedBothTiers(t *testing.T) {
	t.Parallel()
	w := newLocal(t)
	os.MkdirAll(w.dir, 0o755)
	var seg0 []byte
	for _, off := range []int64{3, 50, 99} {
		seg0, _ = batch.AppendBatch(seg0, batch.NewParams(off, 0), []batch.Record{{Timestamp: 5000 + off, Value: []byte{byte(off)}}}, nil)
	}
	os.WriteFile(filepath.Join(w.dir, kafkalog.FileName(0, ".log")), seg0, 0o644)
	l := w.open()
	if l.HighWatermark() != 100 {
		t.Fatalf("high watermark %d", l.HighWatermark())
	}
	recs := make([]seglog.Record, 10)
	for i := range recs {
		recs[i] = seglog.Record{Timestamp: 6000 + int64(i), Value: bytes.Repeat([]byte{byte(i)}, 100)}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if base, err := l.AppendBatch(batch.CodecZstd, recs...); err != nil || base != 100 {
		t.Fatalf("append: %d %v", base, err)
	}
	check := func(where string) {
		for _, tc := range []struct{ off, want int64 }{{0, 3}, {10, 50}, {51, 99}, {100, 100}, {105, 100}, {109, 100}} {
			data, err := l.Read(tc.off, 1)
			if err != nil {
				t.Fatalf("%s: read %d: %v", where, tc.off, err)
			}
			b := firstBatch(t, data)
			if b.BaseOffset != tc.want || int(b.Size) != len(data) {
				t.Errorf("%s: read %d starts at %d (%d of %d bytes), want %d", where, tc.off, b.BaseOffset, b.Size, len(data), tc.want)
			}
			if tc.want == 100 && (b.Codec != batch.CodecZstd || b.LastOffset != 109) {
				t.Errorf("%s: compressed batch %+v", where, b)
			}
		}
	}
	check("local")
	l.Roll()
	c := w.copier(func(cfg *copier.Config) { cfg.Retention.LocalRetentionMs = ptr(0) })
	if _, err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l.LocalLogStartOffset() != 110 {
		rows, _ := w.store.Segments(w.tp)
		ents, _ := os.ReadDir(w.dir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("local log start offset %d; rows %+v; files %v", l.LocalLogStartOffset(), rows, names)
	}
	check("remote")
}

// Case 11: a Fetch running while local retention removes the segment it
// reads, 1000 times: every read succeeds, from local or remote.
func TestCaseFetchDuringLocalDeletion(t *testing.T) {
	w := newLocalOn(t, memory.New()) // no fsyncs: 1000 rounds stay quick
	l := w.open()
	c := w.copier(func(cfg *copier.Config) { cfg.Retention.LocalRetentionMs = ptr(0) })
	rounds := 1000
	if raceEnabled {
		rounds = 150
	}
	var reads, remote atomic.Int64
	for i := 0; i < rounds; i++ {
		off, err := l.Append(seglog.Record{Value: value(int64(i))})
		if err != nil {
			t.Fatal(err)
		}
		l.Roll()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for r := 0; r < 2; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					data, err := l.Read(off, 1<<10)
					if err != nil {
						errs <- err
						return
					}
					if b := firstBatch(t, data); b.BaseOffset != off {
						errs <- os.ErrInvalid
						return
					}
					reads.Add(1)
					time.Sleep(100 * time.Microsecond) // leave the CPU to the copier
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		if _, err := c.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if l.LocalLogStartOffset() > off { // the segment left local disk during the reads
			remote.Add(1)
		}
		time.Sleep(300 * time.Microsecond) // a few more reads, now remote
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: read %d failed: %v", i, off, err)
		}
	}
	if remote.Load() != int64(rounds) {
		t.Fatalf("the segment left local disk in %d of %d rounds", remote.Load(), rounds)
	}
	t.Logf("%d reads over %d rounds, each racing the local deletion of the segment read", reads.Load(), rounds)
}

// Case 13: an offset-by-timestamp query while the matching segment moves
// from local to remote gives the right offset at every step.
func TestCaseTimestampDuringMove(t *testing.T) {
	t.Parallel()
	w := newLocal(t)
	l := w.open()
	for i := int64(0); i < 20; i++ {
		l.Append(seglog.Record{Value: []byte{byte(i)}, Timestamp: 1000 + i*10})
	}
	l.Roll()
	for i := int64(20); i < 25; i++ {
		l.Append(seglog.Record{Value: []byte{byte(i)}, Timestamp: 1000 + i*10})
	}
	check := func(step string) {
		for _, tc := range []struct{ ts, want int64 }{{1000, 0}, {1055, 6}, {1190, 19}, {1191, 20}, {1240, 24}} {
			off, _, err := l.OffsetForTimestamp(tc.ts)
			if err != nil || off != tc.want {
				t.Errorf("%s: timestamp %d -> %d, %v; want %d", step, tc.ts, off, err, tc.want)
			}
		}
	}
	check("all local")
	keep := w.copier(func(cfg *copier.Config) {
		cfg.Retention.LocalRetentionMs = ptr(-1)
		cfg.Retention.RetentionMs = ptr(-1)
	})
	keep.Sync(context.Background())
	check("copied, still local")
	drop := w.copier(func(cfg *copier.Config) { cfg.Retention.LocalRetentionMs = ptr(0); cfg.Retention.RetentionMs = ptr(-1) })
	drop.Sync(context.Background())
	check("renamed locally, log not refreshed")
	l.Refresh()
	if l.LocalLogStartOffset() != 20 {
		t.Fatalf("local log start offset %d", l.LocalLogStartOffset())
	}
	check("remote only")
	// And racing: queries while another partition state moves, many times.
	for i := int64(0); i < 50; i++ {
		base := 25 + i*2
		l.Append(seglog.Record{Value: []byte("a"), Timestamp: 5000 + base})
		l.Append(seglog.Record{Value: []byte("b"), Timestamp: 5000 + base + 1})
		l.Roll()
		done := make(chan struct{})
		go func() { drop.Sync(context.Background()); close(done) }()
		for k := 0; k < 20; k++ {
			off, _, err := l.OffsetForTimestamp(5000 + base + 1)
			if err != nil || off != base+1 {
				t.Fatalf("round %d: %d %v, want %d", i, off, err, base+1)
			}
		}
		<-done
	}
}

func ptr(v int64) *int64 { return &v }

// A reader through the embedded log moves past a tiered tail whose last
// offsets were compacted away: Read returns the next local batch.
func TestCaseEmptyTieredTail(t *testing.T) {
	t.Parallel()
	w := newLocal(t)
	os.MkdirAll(w.dir, 0o755)
	var seg0 []byte
	for _, off := range []int64{3, 50} {
		seg0, _ = batch.AppendBatch(seg0, batch.NewParams(off, 0), []batch.Record{{Timestamp: 5000 + off, Value: []byte{byte(off)}}}, nil)
	}
	os.WriteFile(filepath.Join(w.dir, kafkalog.FileName(0, ".log")), seg0, 0o644)
	os.WriteFile(filepath.Join(w.dir, kafkalog.FileName(100, ".log")), nil, 0o644)
	l := w.open()
	if _, err := l.Append(seglog.Record{Value: []byte("local"), Timestamp: 6000}); err != nil {
		t.Fatal(err)
	}
	w.copier(func(cfg *copier.Config) { cfg.Retention.LocalRetentionMs = ptr(0) }).Sync(context.Background())
	if l.LocalLogStartOffset() != 100 {
		t.Fatalf("local log start offset %d", l.LocalLogStartOffset())
	}
	data, err := l.Read(60, 1)
	if err != nil || len(data) == 0 || firstBatch(t, data).BaseOffset != 100 {
		t.Fatalf("read past the tiered tail: %d bytes, %v", len(data), err)
	}
}
