package copier

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// take returns the requests b counted since the last take, by method,
// and starts over.
func take(b *rsmtest.CountingBucket) map[string]int {
	m := b.Calls()
	b.Reset()
	return m
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
	bucket *rsmtest.CountingBucket
	store  *rlmm.Store
	syncs  atomic.Int64
	c      *Copier
	now    time.Time
	parts  int
	dbDir  string
	mgr    *rsm.Manager
	cfg    Config
	down   atomic.Bool // the lease objects' reads and writes fail (downBucket)
	// perTopic is the number of partitions of each topic: 16, or all of
	// them in one topic with TIERD_SCALE_ONE_TOPIC set (as tierd bench's
	// scale_partitions has them).
	perTopic int
}

func newScaleRig(tb testing.TB, n int, cfg Config) *scaleRig {
	tb.Helper()
	return newScaleRigIn(tb, n, cfg, tb.TempDir(), tb.TempDir(), filepath.Join(tb.TempDir(), "db"), true)
}

// newScaleRigIn is newScaleRig over the given directories; with write
// false the log dir is taken as written before.
func newScaleRigIn(tb testing.TB, n int, cfg Config, logDir, bucketDir, dbDir string, write bool) *scaleRig {
	tb.Helper()
	r := &scaleRig{logDir: logDir, now: time.UnixMilli(1_700_000_000_000), parts: n, dbDir: dbDir, perTopic: 16}
	if os.Getenv("TIERD_SCALE_ONE_TOPIC") != "" {
		r.perTopic = n
	}
	if write {
		r.writeLogs(tb, n)
	}
	fsb, err := filesystem.New(filesystem.Config{Dir: bucketDir})
	if err != nil {
		tb.Fatal(err)
	}
	r.bucket = rsmtest.Count(downBucket{Bucket: fsb, down: &r.down})
	tb.Cleanup(func() { r.store.Close() })
	if r.mgr, err = rsm.NewManager(r.bucket, rsm.Config{Prefix: "tierd"}); err != nil {
		tb.Fatal(err)
	}
	cfg.LogDirs = []string{r.logDir}
	cfg.BrokerID = 0
	cfg.InstanceID = "scale-instance"
	r.cfg = cfg
	r.open(tb)
	return r
}

// writeLogs writes the rig's n partitions and checkpoint files.
func (r *scaleRig) writeLogs(tb testing.TB, n int) {
	tb.Helper()
	ts := r.now.UnixMilli()
	var hw, lso strings.Builder
	fmt.Fprintf(&hw, "0\n%d\n", n)
	fmt.Fprintf(&lso, "0\n%d\n", n)
	for i := 0; i < n; i++ {
		tp := kafkalog.TopicPartition{Topic: fmt.Sprintf("t%d", i/r.perTopic), Partition: int32(i % r.perTopic)}
		dir := filepath.Join(r.logDir, tp.String())
		for s := int64(0); s < 4; s++ {
			cnt := 3
			if s == 3 {
				cnt = 0 // the active segment, empty
			}
			writeSegment(tb, dir, s*3, seq(s*3, cnt), same(ts, cnt), 10)
		}
		writeFile2(tb, filepath.Join(dir, kafkalog.PartitionMetadataFile), fmt.Sprintf("version: 0\ntopic_id: %s\n", topicIDFor(i/r.perTopic)))
		fmt.Fprintf(&hw, "%s %d 9\n", tp.Topic, tp.Partition)
		fmt.Fprintf(&lso, "%s %d 0\n", tp.Topic, tp.Partition)
	}
	writeFile2(tb, filepath.Join(r.logDir, kafkalog.ReplicationOffsetCheckpointFile), hw.String())
	writeFile2(tb, filepath.Join(r.logDir, kafkalog.LogStartOffsetCheckpointFile), lso.String())
}

// open opens the rig's metadata store and a new copier over it.
func (r *scaleRig) open(tb testing.TB) {
	tb.Helper()
	var err error
	if r.store, err = rlmm.Open(rlmm.Config{Dir: r.dbDir}, rlmm.WithFS(syncCountingFS{FS: vfs.Default, syncs: &r.syncs}),
		rlmm.WithClock(func() time.Time { return r.now })); err != nil {
		tb.Fatal(err)
	}
	if r.c, err = New(r.cfg, r.store, r.mgr, WithClock(func() time.Time { return r.now })); err != nil {
		tb.Fatal(err)
	}
}

// restart closes the metadata store and opens it again with a new
// copier, as a restarted tierd does (the copier's memory is gone).
func (r *scaleRig) restart(tb testing.TB) {
	tb.Helper()
	if err := r.store.Close(); err != nil {
		tb.Fatal(err)
	}
	r.open(tb)
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
	take(r.bucket)
	before := r.syncs.Load()
	n, err := r.c.Sync(context.Background())
	if err != nil {
		tb.Fatalf("sync: %v", err)
	}
	return n, take(r.bucket), r.syncs.Load() - before
}

// TestScaleReproducer measures idle passes over many partitions: a first
// pass, then idle passes, logging what each cost (TIERD_SCALE_N sets the
// partition count, default 200; TIERD_SCALE_PROF a CPU profile of the
// idle passes).
func TestScaleReproducer(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
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

// An idle pass (nothing new locally, nothing due) over N partitions with
// Kafka's checkpoint files makes no bucket request and no synced metadata
// write, at any N, with tierd's local retention and with the broker's
// (broker_owned), with the default settings: the sampled copy checks
// (copy_checks_per_pass) run once per copy_check_interval_ms, not per
// pass, and then cost the same few requests at any N.
func TestIdlePassCost(t *testing.T) {
	for _, brokerOwned := range []bool{false, true} {
		sampled := map[int]map[string]int{}
		for _, n := range []int{8, 40} {
			cfg := DefaultConfig() // sampled checks on: 4 copies every 5 minutes
			cfg.BrokerOwned = yes(brokerOwned)
			r := newScaleRig(t, n, cfg)
			if copied, _, _ := r.pass(t); copied != 3*n {
				t.Fatalf("N=%d: first pass copied %d, want %d", n, copied, 3*n)
			}
			for i := 0; i < 3; i++ {
				r.now = r.now.Add(30 * time.Second)
				copied, reqs, syncs := r.pass(t)
				if copied != 0 || total(reqs) != 0 || syncs != 0 {
					t.Errorf("broker_owned %v, N=%d idle pass %d: copied %d, bucket requests %v, Pebble syncs %d; want none",
						brokerOwned, n, i, copied, reqs, syncs)
				}
			}
			// copy_check_interval_ms after the first pass's round, the
			// next round of sampled checks.
			r.now = r.now.Add(5 * time.Minute)
			_, sampled[n], _ = r.pass(t)
		}
		if a, b := sampled[8], sampled[40]; total(a) == 0 || total(a) != total(b) {
			t.Errorf("sampled copy checks: %v requests at 8 partitions, %v at 40; want the same, not none", a, b)
		}
	}
}

// leaseRequests counts the requests that read or write lease objects
// (partition leases and heartbeats).
func leaseRequests(m map[string]int) int {
	return m["ReadVersioned"] + m["PutIfAbsent"] + m["PutIfMatch"]
}

// Renewing the ownership leases costs the same requests per interval at
// any partition count: one heartbeat write per third of the lease.
func TestLeaseRenewalIndependentOfN(t *testing.T) {
	perN := map[int][]int{}
	for _, n := range []int{4, 32} {
		cfg := DefaultConfig()
		cfg.CopyChecksPerPass = 0
		r := newScaleRig(t, n, cfg)
		r.pass(t)
		for i := 0; i < 9; i++ { // three lease periods, a pass every ninth of the lease
			r.now = r.now.Add(cfg.OwnershipLease / 9)
			_, reqs, _ := r.pass(t)
			perN[n] = append(perN[n], leaseRequests(reqs))
			if other := total(reqs) - leaseRequests(reqs); other != 0 {
				t.Errorf("N=%d pass %d: %v", n, i, reqs)
			}
		}
	}
	want := []int{0, 0, 1, 0, 0, 1, 0, 0, 1}
	for n, got := range perN {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("N=%d: lease requests per pass %v, want %v (one heartbeat write per third of the lease)", n, got, want)
		}
	}
}

// cpuTime is the CPU time (user and system) this process used so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSizes are the partition counts of the scale benchmarks:
// TIERD_BENCH_PARTITIONS (comma-separated), default 100,1000,10000.
func benchSizes() []int {
	s := os.Getenv("TIERD_BENCH_PARTITIONS")
	if s == "" {
		s = "100,1000,10000"
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// benchPasses runs the sub-benchmark of each size; pass runs one measured
// pass on a rig and returns its CPU time. It reports CPU per pass (ms)
// and, from the second size on, its growth per tenfold of partitions:
// (cpu(N) / cpu(prev))^(1/log10(N/prev)).
func benchPasses(b *testing.B, pass func(b *testing.B, n int) time.Duration) {
	prev, prevN := time.Duration(0), 0
	for _, n := range benchSizes() {
		var cpu time.Duration
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			cpu = 0
			for i := 0; i < b.N; i++ {
				cpu += pass(b, n)
			}
			cpu /= time.Duration(b.N)
			b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms/pass")
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/partition")
			if prevN > 0 && prev > 0 {
				b.ReportMetric(math.Pow(float64(cpu)/float64(prev), 1/math.Log10(float64(n)/float64(prevN))), "growth/10x")
			}
		})
		prev, prevN = cpu, n
	}
}

// BenchmarkFirstPass measures the first pass over N partitions of 3
// small rolled segments (all copied, over the filesystem bucket).
func BenchmarkFirstPass(b *testing.B) {
	benchPasses(b, func(b *testing.B, n int) time.Duration {
		b.StopTimer()
		r := newScaleRig(b, n, DefaultConfig())
		b.StartTimer()
		start := cpuTime(b)
		if copied, _, _ := r.pass(b); copied != 3*n {
			b.Fatalf("copied %d of %d", copied, 3*n)
		}
		return cpuTime(b) - start
	})
}

// BenchmarkIdlePass measures a pass over N partitions with nothing to do
// (after a first pass that copied everything), with the default config
// (ownership lease and sampled copy checks on).
func BenchmarkIdlePass(b *testing.B) {
	rigs := map[int]*scaleRig{}
	outer := b // the rig outlives the sub-benchmark's runs
	benchPasses(b, func(b *testing.B, n int) time.Duration {
		r := rigs[n]
		if r == nil {
			b.StopTimer()
			r = newScaleRig(outer, n, DefaultConfig())
			r.pass(b)
			rigs[n] = r
			b.StartTimer()
		}
		r.now = r.now.Add(30 * time.Second)
		start := cpuTime(b)
		if copied, _, _ := r.pass(b); copied != 0 {
			b.Fatalf("an idle pass copied %d", copied)
		}
		return cpuTime(b) - start
	})
}
