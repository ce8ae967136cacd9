// Package readtest is test support for the remote read engine and its
// gRPC edge (packages remoteread and fetch): a counting bucket, a rig of
// real Pebble metadata (in memory) and rsm over a bucket, the copier's
// tiering of a partition directory, the reference log, and metric reads.
// Only tests import it.
package readtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/seglog"
)

// CountingBucket counts the GETs and bytes read from the bucket, and the
// GETs of .log and .txnindex objects. With Gate set, every GET waits for
// it (or its ctx).
type CountingBucket struct {
	rsm.Bucket
	Read, Gets, LogGets, TxnGets atomic.Int64
	Gate                         atomic.Pointer[chan struct{}]
	Pace                         atomic.Int64 // > 0: bodies deliver 16 KiB per Read, sleeping this many ns before each
}

// pacedReader delivers its bytes 16 KiB per Read, sleeping before each.
type pacedReader struct {
	r     io.Reader
	sleep time.Duration
}

func (p pacedReader) Read(b []byte) (int, error) {
	time.Sleep(p.sleep)
	return p.r.Read(b[:min(len(b), 16<<10)])
}

// GetRange counts the GET, waits for Gate, and returns the whole body
// read at once (paced when Pace is set).
func (c *CountingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	c.Gets.Add(1)
	if strings.HasSuffix(key, ".log") {
		c.LogGets.Add(1)
	}
	if strings.HasSuffix(key, kafkalog.TxnIndexSuffix) {
		c.TxnGets.Add(1)
	}
	if g := c.Gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rc, err := c.Bucket.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	c.Read.Add(int64(len(data)))
	if p := c.Pace.Load(); p > 0 {
		return io.NopCloser(pacedReader{bytes.NewReader(data), time.Duration(p)}), err
	}
	return io.NopCloser(bytes.NewReader(data)), err
}

// Rig is a partition's remote tier for a test: metadata in Pebble on an
// in-memory file system, copies through Mgr into Bucket.
type Rig struct {
	T      testing.TB
	Store  *rlmm.Store
	Mgr    *rsm.Manager
	Bucket *CountingBucket
	TP     remotelog.TopicPartition // t-0
}

// FSBucket is a filesystem bucket in a temporary dir of t.
func FSBucket(t testing.TB) rsm.Bucket {
	t.Helper()
	b, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// NewRig returns a rig over b (counted), its store closed at the test's
// end.
func NewRig(t testing.TB, b rsm.Bucket) *Rig {
	t.Helper()
	var err error
	r := &Rig{T: t, Bucket: &CountingBucket{Bucket: b}, TP: remotelog.TopicPartition{Topic: "t", Partition: 0}}
	if r.Store, err = rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Store.Close() })
	if r.Mgr, err = rsm.NewManager(r.Bucket, rsm.Config{}); err != nil {
		t.Fatal(err)
	}
	return r
}

// Tier copies every rolled segment of a partition directory as the copier
// would: a COPY_SEGMENT_STARTED row, the objects, COPY_SEGMENT_FINISHED.
func (r *Rig) Tier(dir string) { r.TierEach(dir, nil) }

// TierEach is Tier with each, when set, adjusting every copy's row and
// files before the copy.
func (r *Rig) TierEach(dir string, each func(meta *remotelog.SegmentMetadata, files *rsm.SegmentFiles)) {
	r.T.Helper()
	ents, _ := os.ReadDir(dir)
	var bases []int64
	sizes := map[int64]int64{}
	for _, en := range ents {
		if f, ok := kafkalog.ParseFileName(en.Name()); ok && f.Live && f.Suffix == kafkalog.LogSuffix {
			bases = append(bases, f.BaseOffset)
			info, _ := en.Info()
			sizes[f.BaseOffset] = info.Size()
		}
	}
	for i := 0; i+1 < len(bases); i++ {
		base, end := bases[i], bases[i+1]-1
		p := func(s string) string { return filepath.Join(dir, kafkalog.FileName(base, s)) }
		meta := remotelog.SegmentMetadata{TopicPartition: r.TP, ID: remotelog.NewSegmentID(), StartOffset: base, EndOffset: end,
			SizeInBytes: sizes[base], State: remotelog.CopySegmentStarted, MaxTimestampMs: MaxTimestamp(r.T, p(kafkalog.LogSuffix))}
		files := rsm.SegmentFiles{Log: p(kafkalog.LogSuffix), OffsetIndex: p(kafkalog.IndexSuffix), TimeIndex: p(kafkalog.TimeIndexSuffix)}
		if each != nil {
			each(&meta, &files)
		}
		if err := r.Store.AddSegment(meta); err != nil {
			r.T.Fatal(err)
		}
		if _, err := r.Mgr.CopySegment(context.Background(), meta, files); err != nil {
			r.T.Fatal(err)
		}
		if _, err := r.Store.UpdateState(r.TP, base, meta.ID, remotelog.CopySegmentFinished); err != nil {
			r.T.Fatal(err)
		}
	}
}

// MaxTimestamp is the largest batch max timestamp of the .log at p.
func MaxTimestamp(t testing.TB, p string) int64 {
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{})
	ts := int64(-1)
	for s.Next() {
		ts = max(ts, s.Batch().MaxTimestamp)
	}
	return ts
}

// ReferenceLog writes the 600-record reference scenario (records of 5000
// bytes, one per batch, timestamps 1,000,000 + 10*offset ms, segments of
// seglog.MinSegmentBytes), tiers it with r, and returns its directory.
func ReferenceLog(t testing.TB, r *Rig) string {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 600; i++ {
		if _, err := l.Append(seglog.Record{Value: bytes.Repeat([]byte{byte(i)}, 5000), Timestamp: 1_000_000 + i*10}); err != nil {
			t.Fatal(err)
		}
	}
	l.Roll()
	l.Close()
	r.Tier(dir)
	return dir
}

// Batches splits fetched bytes into entries, failing t on a bad CRC.
func Batches(t testing.TB, data []byte) []batch.Batch {
	t.Helper()
	var out []batch.Batch
	s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{VerifyCRC: true})
	for s.Next() {
		if !s.CRCValid() {
			t.Fatalf("CRC mismatch in fetched batch at %d", s.Batch().Position)
		}
		out = append(out, s.Batch())
	}
	if s.Err() != nil {
		t.Fatalf("fetched bytes: %v", s.Err())
	}
	return out
}
