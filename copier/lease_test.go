package copier

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/memory"
)

// leaseRig is a tierd with the ownership lease on (1 minute), sharing the
// bucket b, with segments [0, 100) and [100, 200) rolled locally.
func leaseRig(t *testing.T, b rsm.Bucket, broker int32) *rig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BrokerOwned, cfg.BrokerID, cfg.OwnershipLease, cfg.CopyTimeout = yes(true), broker, time.Minute, 20*time.Second
	r := newRig(t, cfg, b)
	ts := r.now.UnixMilli()
	for base := int64(0); base < 200; base += 100 {
		writeSegment(t, r.dir(), base, seq(base, 100), same(ts, 100), 10)
	}
	writeSegment(t, r.dir(), 200, nil, nil, 0)
	return r
}

func (r *rig) lease() rsm.Lease {
	r.t.Helper()
	l, ok, err := r.mgr.ReadLease(context.Background(), r.tp)
	if err != nil || !ok {
		r.t.Fatalf("lease: %v %v", ok, err)
	}
	return l
}

func (r *rig) manifests() int {
	return strings.Count(strings.Join(r.objects(), " "), ".manifest.json")
}

// broker_id is required with the lease, and an instance id with it.
func TestBrokerIDRequired(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogDirs = []string{t.TempDir()}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "broker_id is required with ownership_lease") {
		t.Errorf("Validate without broker_id: %v", err)
	}
	cfg.OwnershipLease = 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate without broker_id and without the lease: %v", err)
	}
	cfg.OwnershipLease, cfg.BrokerID = time.Hour, 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with broker_id 0: %v", err)
	}
	if _, err := New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "instance id is required") {
		t.Errorf("New without an instance id: %v", err)
	}
}

// Two tierds race for an expired lease, many times: each round exactly
// one of them holds it, and exactly one copies the round's new segment,
// so every segment is copied once.
func TestLeaseRace(t *testing.T) {
	for name, mk := range map[string]func(t *testing.T) rsm.Bucket{
		"memory": func(*testing.T) rsm.Bucket { return memory.New() },
		"filesystem": func(t *testing.T) rsm.Bucket {
			b, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			shared := mk(t)
			rigs := []*rig{leaseRig(t, shared, 1), leaseRig(t, shared, 2)}
			ctx := context.Background()
			race := func(round int, f func(r *rig) (int, bool)) []int {
				for _, r := range rigs {
					r.now = r.now.Add(2 * time.Minute) // the lease expired
				}
				start := make(chan struct{})
				var won []int
				var mu sync.Mutex
				var wg sync.WaitGroup
				for i, r := range rigs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						if n, ok := f(r); ok {
							mu.Lock()
							won = append(won, i)
							mu.Unlock()
						} else if n != 0 {
							t.Errorf("round %d: tierd %d copied %d without the lease", round, i, n)
						}
					}()
				}
				close(start)
				wg.Wait()
				if len(won) != 1 {
					t.Fatalf("round %d: %d tierds won the lease (%v), want 1", round, len(won), won)
				}
				return won
			}
			wins := [2]int{}
			for round := 0; round < 100; round++ {
				w := race(round, func(r *rig) (int, bool) {
					ok, err := r.c.own.(*leaseOwner).claim(ctx, r.tp)
					if err != nil {
						t.Errorf("claim: %v", err)
					}
					return 0, ok
				})
				wins[w[0]]++
				if l := rigs[w[0]].lease(); l.BrokerID != rigs[w[0]].c.cfg.BrokerID {
					t.Fatalf("round %d: tierd %d won, the lease names broker %d", round, w[0], l.BrokerID)
				}
			}
			// Whole passes: each round both logs gain a segment, and only
			// the tierd that won the lease copies it.
			for round := 0; round < 20; round++ {
				base := int64(300 + 100*round)
				for _, r := range rigs {
					writeSegment(t, r.dir(), base-100, seq(base-100, 100), same(r.now.UnixMilli(), 100), 10)
					writeSegment(t, r.dir(), base, nil, nil, 0)
				}
				race(round, func(r *rig) (int, bool) {
					n, err := r.c.Sync(ctx)
					if err != nil {
						t.Errorf("sync: %v", err)
					}
					return n, r.c.own.(*leaseOwner).held(r.tp)
				})
			}
			if n := rigs[0].manifests(); n != 22 {
				t.Fatalf("%d copies of 22 segments: some were copied twice or not at all", n)
			}
			t.Logf("claim races won: %v", wins)
		})
	}
}

// A second tierd with the same broker_id and another instance id is
// refused with a clear error while the lease is held, and takes it only
// once it has expired.
func TestInstanceConflict(t *testing.T) {
	shared := memory.New()
	a, b := leaseRig(t, shared, 1), leaseRig(t, shared, 1)
	if n := a.sync(); n != 2 {
		t.Fatalf("first tierd copied %d", n)
	}
	for _, d := range []time.Duration{0, 50 * time.Second} {
		b.now = a.now.Add(d)
		n, err := b.c.Sync(context.Background())
		if !errors.Is(err, errInstanceConflict) || n != 0 {
			t.Fatalf("second tierd after %s: copied %d, err %v", d, n, err)
		}
		for _, want := range []string{a.c.cfg.InstanceID, b.c.cfg.InstanceID, "broker_id 1", "orders-0", "Stop the other tierd", "its own broker_id"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	}
	if got := testutilCounter(t, b.c.m.instanceConflicts); got != 2 {
		t.Errorf("instance conflicts counted %v, want 2", got)
	}
	if l := a.lease(); l.InstanceID != a.c.cfg.InstanceID {
		t.Fatalf("lease taken from the holder: %+v", l)
	}
	b.now = a.now.Add(2 * time.Minute)
	b.sync()
	if l := b.lease(); l.InstanceID != b.c.cfg.InstanceID || l.Reconcile {
		t.Fatalf("lease after expiry: %+v", l)
	}
	if off := b.offsets(); off.HighestTieredOffset != 199 || b.manifests() != 2 {
		t.Fatalf("after the takeover: %+v, %d copies", off, b.manifests())
	}
}

// Run releases the leases it holds when it returns, and another tierd
// takes the partition at once, without waiting for the lease to expire.
func TestLeaseReleasedOnShutdown(t *testing.T) {
	shared := memory.New()
	a, b := leaseRig(t, shared, 1), leaseRig(t, shared, 2)
	a.sync()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if l := a.lease(); !l.HeartbeatReleased || !l.Free(a.now.UnixMilli(), time.Minute.Milliseconds()) || l.BrokerID != 1 {
		t.Fatalf("lease after shutdown: %+v", l)
	}
	b.now = a.now // not expired
	b.sync()
	if l := b.lease(); l.BrokerID != 2 || l.Free(b.now.UnixMilli(), time.Minute.Milliseconds()) {
		t.Fatalf("lease after the other tierd's pass: %+v", l)
	}
	if off := b.offsets(); off.HighestTieredOffset != 199 || b.manifests() != 2 {
		t.Fatalf("the new owner did not adopt the copies: %+v, %d copies", off, b.manifests())
	}
}

// failingManifests fails the listing of manifests a number of times, as a
// crash or an unreachable bucket right after a lease takeover would.
type failingManifests struct {
	RemoteStorage
	fails int
}

func (f *failingManifests) Manifests(ctx context.Context, tp remotelog.TopicPartition) ([]*rsm.Manifest, error) {
	if f.fails > 0 {
		f.fails--
		return nil, errors.New("injected: bucket unreachable")
	}
	return f.RemoteStorage.Manifests(ctx, tp)
}

// A tierd that took a lease over but did not reconcile (it failed, or
// crashed) reconciles on its next pass, after a restart too: the lease
// says so. Without that it would act on stale rows and copy again what
// the previous owner had copied.
func TestTakeoverReconcilesAfterRestart(t *testing.T) {
	shared := memory.New()
	a, b := leaseRig(t, shared, 1), leaseRig(t, shared, 2)
	a.sync()
	b.store.EnsurePartition(b.tp, 0) // B knows the partition (stale): no adoption
	b.now = a.now.Add(2 * time.Minute)
	c, err := New(b.c.cfg, b.store, &failingManifests{RemoteStorage: b.mgr, fails: 1}, WithClock(func() time.Time { return b.now }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("takeover with a failing reconcile: %v", err)
	}
	if l := b.lease(); l.BrokerID != 2 || !l.Reconcile {
		t.Fatalf("lease after the failed reconcile: %+v", l)
	}
	// Restart.
	if b.c, err = New(b.c.cfg, b.store, b.mgr, WithClock(func() time.Time { return b.now })); err != nil {
		t.Fatal(err)
	}
	if n := b.sync(); n != 0 {
		t.Fatalf("copied %d segments the previous owner had copied", n)
	}
	if l := b.lease(); l.Reconcile {
		t.Fatalf("lease still asks for a reconcile: %+v", l)
	}
	if off := b.offsets(); off.HighestTieredOffset != 199 || b.manifests() != 2 {
		t.Fatalf("after the restart: %+v, %d copies", off, b.manifests())
	}
}

// A lease object written before instance ids: one of this broker id is
// taken as this tierd's (with a reconcile), one of another broker id is
// respected while it lasts.
func TestLegacyLease(t *testing.T) {
	shared := memory.New()
	r := leaseRig(t, shared, 1)
	put := func(body string) {
		shared.Upload(context.Background(), r.mgr.PartitionPrefix(r.tp)+rsm.OwnerObject, bytes.NewReader([]byte(body)), int64(len(body)))
	}
	put(`{"brokerId":2,"renewedMs":` + itoa(r.now.UnixMilli()) + `}`)
	if n := r.sync(); n != 0 {
		t.Fatalf("copied %d under another broker's lease", n)
	}
	put(`{"brokerId":1,"renewedMs":` + itoa(r.now.UnixMilli()) + `}`)
	if n := r.sync(); n != 2 {
		t.Fatalf("copied %d under this broker's old-format lease", n)
	}
	if l := r.lease(); l.InstanceID != r.c.cfg.InstanceID || l.Reconcile {
		t.Fatalf("lease %+v", l)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// A holder that keeps renewing its heartbeat keeps its partitions however
// old their lease objects are: another tierd leaves them alone; once the
// heartbeat stops, the other tierd takes over after the lease, and the
// old holder, back after the takeover, reads the lease again and copies
// nothing.
func TestHeartbeatKeepsPartition(t *testing.T) {
	shared := memory.New()
	a, b := leaseRig(t, shared, 1), leaseRig(t, shared, 2)
	if n := a.sync(); n != 2 {
		t.Fatalf("holder copied %d", n)
	}
	written := a.lease().Generation
	for i := 0; i < 6; i++ { // 3 minutes: three leases
		a.now = a.now.Add(30 * time.Second)
		a.sync()
		b.now = a.now
		if n := b.sync(); n != 0 {
			t.Fatalf("after %d s: the other tierd copied %d under a live heartbeat", 30*(i+1), n)
		}
	}
	if l := a.lease(); l.BrokerID != 1 || l.Generation != written {
		t.Fatalf("lease object written again by the renewals: %+v (generation %d at first)", l, written)
	}
	// The holder stops; the other tierd takes over after the lease.
	b.now = a.now.Add(61 * time.Second)
	for _, r := range []*rig{a, b} {
		ts := r.now.UnixMilli()
		writeSegment(t, r.dir(), 200, seq(200, 100), same(ts, 100), 10)
		writeSegment(t, r.dir(), 300, nil, nil, 0)
	}
	if n := b.sync(); n != 1 {
		t.Fatalf("new holder copied %d", n)
	}
	a.now = b.now.Add(time.Second)
	for _, r := range []*rig{a, b} {
		ts := r.now.UnixMilli()
		writeSegment(t, r.dir(), 300, seq(300, 100), same(ts, 100), 10)
		writeSegment(t, r.dir(), 400, nil, nil, 0)
	}
	if n := a.sync(); n != 0 {
		t.Fatalf("old holder copied %d after the takeover", n)
	}
	if n := b.sync(); n != 1 || b.manifests() != 4 {
		t.Fatalf("new holder copied %d, %d copies", n, b.manifests())
	}
}
