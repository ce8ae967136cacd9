package copier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierd/tierd/rsm"
)

// This file holds the scale tests of a restarted copier and of a bucket
// that cannot be reached; the rig is scale_test.go's.

// errBucketDown is what downBucket answers while down.
var errBucketDown = errors.New("bucket down")

// downBucket fails the conditional reads and writes (leases, heartbeats)
// while down is set, as a bucket that cannot be reached does; everything
// else passes through.
type downBucket struct {
	rsm.Bucket
	down *atomic.Bool
}

func (b downBucket) ReadVersioned(ctx context.Context, key string) ([]byte, rsm.Version, error) {
	if b.down.Load() {
		return nil, "", errBucketDown
	}
	return b.Bucket.ReadVersioned(ctx, key)
}

func (b downBucket) PutIfAbsent(ctx context.Context, key string, data []byte) (rsm.Version, error) {
	if b.down.Load() {
		return "", errBucketDown
	}
	return b.Bucket.PutIfAbsent(ctx, key, data)
}

func (b downBucket) PutIfMatch(ctx context.Context, key string, data []byte, v rsm.Version) (rsm.Version, error) {
	if b.down.Load() {
		return "", errBucketDown
	}
	return b.Bucket.PutIfMatch(ctx, key, data, v)
}

func (b downBucket) IncompleteUploads(ctx context.Context, prefix string) ([]string, error) {
	return b.Bucket.(rsm.MultipartBucket).IncompleteUploads(ctx, prefix)
}

func (b downBucket) AbortIncompleteUploads(ctx context.Context, prefix string) error {
	return b.Bucket.(rsm.MultipartBucket).AbortIncompleteUploads(ctx, prefix)
}

func (b downBucket) AbortUploadsOfKey(ctx context.Context, key string) (int, error) {
	return b.Bucket.(rsm.MultipartBucket).AbortUploadsOfKey(ctx, key)
}

// A restarted copier's first pass over N partitions (a new store handle
// and a new copier over the same state, nothing new to copy) costs the
// same requests per partition at any N: one listing of the partition's
// objects and one of its incomplete uploads (the sweep after a start),
// plus the sampled copy checks, which do not depend on N; and it makes
// no synced metadata write.
func TestRestartPassCost(t *testing.T) {
	perPart := map[int]map[string]float64{}
	fixed := map[int]int{}
	for _, n := range []int{8, 40} {
		cfg := DefaultConfig()
		cfg.OwnershipLease = 0 // the leases' own requests are TestLeaseRenewalIndependentOfN's
		r := newScaleRig(t, n, cfg)
		if copied, _, _ := r.pass(t); copied != 3*n {
			t.Fatalf("N=%d: first pass copied %d, want %d", n, copied, 3*n)
		}
		r.restart(t)
		copied, reqs, syncs := r.pass(t)
		if copied != 0 || syncs != 0 {
			t.Errorf("N=%d restart pass: copied %d, %d Pebble syncs; want none", n, copied, syncs)
		}
		perPart[n] = map[string]float64{}
		for m, v := range reqs {
			if m == "Attributes" || m == "GetRange" {
				fixed[n] += v // the sampled copy checks
				continue
			}
			perPart[n][m] = float64(v) / float64(n)
		}
	}
	want := map[string]float64{"Iter": 1, "AbortIncompleteUploads": 1}
	for n, got := range perPart {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("N=%d restart pass: requests per partition %v, want %v", n, got, want)
		}
	}
	if fixed[8] != fixed[40] {
		t.Errorf("restart pass: %d copy-check requests at 8 partitions, %d at 40; want the same", fixed[8], fixed[40])
	}
}

// While the bucket cannot be reached, a pass tries to renew the instance
// heartbeat once, not once per partition, at any partition count, and
// every partition of the pass fails with that error; the pass after the
// bucket is back renews it and tiers again.
func TestHeartbeatOneAttemptPerPass(t *testing.T) {
	for _, n := range []int{4, 32} {
		cfg := DefaultConfig()
		cfg.CopyChecksPerPass = 0
		r := newScaleRig(t, n, cfg)
		if copied, _, _ := r.pass(t); copied != 3*n {
			t.Fatalf("N=%d: first pass copied %d, want %d", n, copied, 3*n)
		}
		r.down.Store(true)
		for i := 0; i < 2; i++ {
			r.now = r.now.Add(cfg.OwnershipLease / 2) // the heartbeat is due
			take(r.bucket)
			_, err := r.c.Sync(context.Background())
			reqs := take(r.bucket)
			if !errors.Is(err, errBucketDown) {
				t.Fatalf("N=%d pass %d with the bucket down: err %v, want the bucket's error", n, i, err)
			}
			if got := leaseRequests(reqs); got != 1 {
				t.Errorf("N=%d pass %d with the bucket down: %d lease requests %v, want 1 (one heartbeat attempt)", n, i, got, reqs)
			}
		}
		r.down.Store(false)
		r.now = r.now.Add(time.Second)
		if _, reqs, _ := r.pass(t); reqs["PutIfMatch"] == 0 {
			t.Errorf("N=%d: the pass after the bucket came back wrote no lease or heartbeat: %v", n, reqs)
		}
	}
}

// TestRestartProfile measures the first pass after a restart: a first
// pass over N partitions (TIERD_SCALE_N), then TIERD_SCALE_RESTARTS
// (default 1) times a new store handle and a new copier over the same
// state and its first pass, logging what each cost and, with
// TIERD_SCALE_PROF, a CPU profile of them. TIERD_SCALE_DIR keeps the
// log dir, bucket and store there, to be reused by the next run (the
// first pass is then skipped); TIERD_SCALE_NO_LEASE runs without the
// ownership lease, as tierd bench's scale_partitions does.
func TestRestartProfile(t *testing.T) {
	if os.Getenv("TIERD_SCALE_N") == "" {
		t.Skip("set TIERD_SCALE_N")
	}
	var n, restarts int
	fmt.Sscan(os.Getenv("TIERD_SCALE_N"), &n)
	restarts = 1
	if s := os.Getenv("TIERD_SCALE_RESTARTS"); s != "" {
		fmt.Sscan(s, &restarts)
	}
	cfg := DefaultConfig()
	if os.Getenv("TIERD_SCALE_NO_LEASE") != "" {
		cfg.OwnershipLease = 0
	}
	var r *scaleRig
	if keep := os.Getenv("TIERD_SCALE_DIR"); keep != "" {
		_, err := os.Stat(filepath.Join(keep, "ready"))
		ready := err == nil
		if !ready {
			os.RemoveAll(keep)
			for _, d := range []string{"logs", "bucket"} {
				if err := os.MkdirAll(filepath.Join(keep, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
		r = newScaleRigIn(t, n, cfg, filepath.Join(keep, "logs"), filepath.Join(keep, "bucket"), filepath.Join(keep, "db"), !ready)
		if !ready {
			r.pass(t)
			writeFile2(t, filepath.Join(keep, "ready"), "")
		}
	} else {
		r = newScaleRig(t, n, cfg)
		start := cpuTime(t)
		copied, _, _ := r.pass(t)
		t.Logf("first pass: %d partitions, copied %d, %s CPU", n, copied, cpuTime(t)-start)
	}
	if p := os.Getenv("TIERD_SCALE_PROF"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	for i := 0; i < restarts; i++ {
		r.restart(t)
		start := cpuTime(t)
		copied, reqs, syncs := r.pass(t)
		cpu := cpuTime(t) - start
		t.Logf("restart pass %d: copied %d, %s CPU (%.1f us a partition), %d requests %v, %d syncs", i, copied, cpu, float64(cpu.Microseconds())/float64(n), total(reqs), reqs, syncs)
	}
}
