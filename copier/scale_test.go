package copier

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
)

// countingBucket counts every request made to the wrapped bucket, by
// method.
type countingBucket struct {
	rsm.Bucket
	mu sync.Mutex
	n  map[string]int
}

func (b *countingBucket) add(m string) {
	b.mu.Lock()
	b.n[m]++
	b.mu.Unlock()
}

// take returns the counts since the last call and starts over.
func (b *countingBucket) take() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.n
	b.n = map[string]int{}
	return out
}

func (b *countingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	b.add("GetRange")
	return b.Bucket.GetRange(ctx, key, off, length)
}

func (b *countingBucket) Attributes(ctx context.Context, key string) (rsm.ObjectAttributes, error) {
	b.add("Attributes")
	return b.Bucket.Attributes(ctx, key)
}

func (b *countingBucket) Iter(ctx context.Context, prefix string, fn func(string) error) error {
	b.add("Iter")
	return b.Bucket.Iter(ctx, prefix, fn)
}

func (b *countingBucket) ReadVersioned(ctx context.Context, key string) ([]byte, rsm.Version, error) {
	b.add("ReadVersioned")
	return b.Bucket.ReadVersioned(ctx, key)
}

func (b *countingBucket) PutIfAbsent(ctx context.Context, key string, data []byte) (rsm.Version, error) {
	b.add("PutIfAbsent")
	return b.Bucket.PutIfAbsent(ctx, key, data)
}

func (b *countingBucket) PutIfMatch(ctx context.Context, key string, data []byte, v rsm.Version) (rsm.Version, error) {
	b.add("PutIfMatch")
	return b.Bucket.PutIfMatch(ctx, key, data, v)
}

func (b *countingBucket) Upload(ctx context.Context, key string, rd io.Reader, size int64) error {
	b.add("Upload")
	return b.Bucket.Upload(ctx, key, rd, size)
}

func (b *countingBucket) Delete(ctx context.Context, key string) error {
	b.add("Delete")
	return b.Bucket.Delete(ctx, key)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// syncCountingFS counts the syncs of files Pebble writes: every synced
// batch commit syncs the WAL, so an idle pass that writes nothing syncs
// nothing.
type syncCountingFS struct {
	vfs.FS
	syncs *atomic.Int64
}

func (fs syncCountingFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, cat)
	if err != nil {
		return nil, err
	}
	return syncCountingFile{File: f, syncs: fs.syncs}, nil
}

func (fs syncCountingFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, cat)
	if err != nil {
		return nil, err
	}
	return syncCountingFile{File: f, syncs: fs.syncs}, nil
}

func (fs syncCountingFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, cat, opts...)
	if err != nil {
		return nil, err
	}
	return syncCountingFile{File: f, syncs: fs.syncs}, nil
}

type syncCountingFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (f syncCountingFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

func (f syncCountingFile) SyncData() error {
	f.syncs.Add(1)
	return f.File.SyncData()
}

func (f syncCountingFile) SyncTo(length int64) (bool, error) {
	f.syncs.Add(1)
	return f.File.SyncTo(length)
}

// scaleRig is N partitions of 3 small rolled segments each (and an empty
// active one) in one log dir with Kafka's replication-offset-checkpoint
// and log-start-offset-checkpoint, a copier over the filesystem bucket
// and Pebble on disk.
type scaleRig struct {
	logDir string
	bucket *countingBucket
	store  *rlmm.Store
	syncs  atomic.Int64
	c      *Copier
	now    time.Time
	parts  int
}

func newScaleRig(tb testing.TB, n int, cfg Config) *scaleRig {
	tb.Helper()
	r := &scaleRig{logDir: tb.TempDir(), now: time.UnixMilli(1_700_000_000_000), parts: n}
	ts := r.now.UnixMilli()
	var hw, lso strings.Builder
	fmt.Fprintf(&hw, "0\n%d\n", n)
	fmt.Fprintf(&lso, "0\n%d\n", n)
	for i := 0; i < n; i++ {
		tp := kafkalog.TopicPartition{Topic: fmt.Sprintf("t%d", i/16), Partition: int32(i % 16)}
		dir := filepath.Join(r.logDir, tp.String())
		for s := int64(0); s < 4; s++ {
			cnt := 3
			if s == 3 {
				cnt = 0 // the active segment, empty
			}
			writeSegment(tb, dir, s*3, seq(s*3, cnt), same(ts, cnt), 10)
		}
		writeFile2(tb, filepath.Join(dir, kafkalog.PartitionMetadataFile), fmt.Sprintf("version: 0\ntopic_id: %s\n", topicIDFor(i/16)))
		fmt.Fprintf(&hw, "%s %d 9\n", tp.Topic, tp.Partition)
		fmt.Fprintf(&lso, "%s %d 0\n", tp.Topic, tp.Partition)
	}
	writeFile2(tb, filepath.Join(r.logDir, kafkalog.ReplicationOffsetCheckpointFile), hw.String())
	writeFile2(tb, filepath.Join(r.logDir, kafkalog.LogStartOffsetCheckpointFile), lso.String())
	fsb, err := filesystem.New(filesystem.Config{Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	r.bucket = &countingBucket{Bucket: fsb, n: map[string]int{}}
	if r.store, err = rlmm.Open(rlmm.Config{Dir: filepath.Join(tb.TempDir(), "db")}, rlmm.WithFS(syncCountingFS{FS: vfs.Default, syncs: &r.syncs}),
		rlmm.WithClock(func() time.Time { return r.now })); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.store.Close() })
	mgr, err := rsm.NewManager(r.bucket, rsm.Config{Prefix: "tierd"})
	if err != nil {
		tb.Fatal(err)
	}
	cfg.LogDirs = []string{r.logDir}
	cfg.BrokerID = 0
	cfg.InstanceID = "scale-instance"
	if r.c, err = New(cfg, r.store, mgr, WithClock(func() time.Time { return r.now })); err != nil {
		tb.Fatal(err)
	}
	return r
}

// topicIDFor returns a topic id as partition.metadata spells it (base64url
// of 16 bytes, no padding).
func topicIDFor(i int) string {
	var id [16]byte
	id[0], id[14], id[15] = 1, byte(i>>8), byte(i)
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func writeFile2(tb testing.TB, p, s string) {
	tb.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// pass runs one Sync and returns what it cost: bucket requests by method
// and Pebble syncs.
func (r *scaleRig) pass(tb testing.TB) (copied int, reqs map[string]int, syncs int64) {
	tb.Helper()
	r.bucket.take()
	before := r.syncs.Load()
	n, err := r.c.Sync(context.Background())
	if err != nil {
		tb.Fatalf("sync: %v", err)
	}
	return n, r.bucket.take(), r.syncs.Load() - before
}

// TestScaleReproducer is the reproducer: a first pass then idle passes.
func TestScaleReproducer(t *testing.T) {
	n := 200
	if s := os.Getenv("TIERD_SCALE_N"); s != "" {
		fmt.Sscan(s, &n)
	}
	r := newScaleRig(t, n, DefaultConfig())
	start := time.Now()
	copied, reqs, syncs := r.pass(t)
	t.Logf("first pass: %d partitions, copied %d in %s, %d requests %v, %d syncs", n, copied, time.Since(start), total(reqs), reqs, syncs)
	if p := os.Getenv("TIERD_SCALE_PROF"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	for i := 0; i < 3; i++ {
		r.now = r.now.Add(30 * time.Second)
		start = time.Now()
		copied, reqs, syncs = r.pass(t)
		t.Logf("idle pass %d: copied %d in %s, %d requests %v, %d syncs", i, copied, time.Since(start), total(reqs), reqs, syncs)
	}
}
