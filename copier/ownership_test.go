package copier

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/memory"
)

func topicID(t *testing.T, dir, id string) {
	os.MkdirAll(dir, 0o755)
	writeFile(t, filepath.Join(dir, kafkalog.PartitionMetadataFile), "version: 0\ntopic_id: "+id+"\n")
}

// Two tierds (two brokers holding replicas) share a bucket: one holds the
// partition's lease and tiers it; the other leaves it alone, and takes
// over once the lease is not renewed.
func TestOwnershipLease(t *testing.T) {
	shared := memory.New()
	mk := func(broker int32) *rig {
		cfg := DefaultConfig()
		cfg.BrokerOwned, cfg.BrokerID, cfg.OwnershipLease, cfg.CopyTimeout = yes(true), broker, time.Minute, 20*time.Second
		r := newRig(t, cfg, shared)
		ts := r.now.UnixMilli()
		for b := int64(0); b < 300; b += 100 {
			writeSegment(t, r.dir(), b, seq(b, 100), same(ts, 100), 10)
		}
		writeSegment(t, r.dir(), 300, nil, nil, 0)
		return r
	}
	a, b := mk(1), mk(2)
	if n := a.sync(); n != 3 {
		t.Fatalf("owner copied %d", n)
	}
	if n := b.sync(); n != 0 || len(b.states()) != 0 {
		t.Fatalf("second tierd copied %d, rows %v", n, b.states())
	}
	// A restarts: its sweep must not touch anything; B still defers.
	a2, err := New(a.c.cfg, a.store, a.mgr, WithClock(func() time.Time { return a.now }))
	if err != nil {
		t.Fatal(err)
	}
	a.c = a2
	a.sync()
	if n := len(a.objects()); n != 15 {
		t.Fatalf("%d objects after the owner restarted", n)
	}
	// A stops renewing; after the lease B takes over and adopts A's copies.
	b.now = b.now.Add(2 * time.Minute)
	b.sync()
	if off := b.offsets(); off.HighestTieredOffset != 299 {
		t.Fatalf("new owner's offsets %+v", off)
	}
	if n := len(b.objects()); n != 15 {
		t.Fatalf("%d objects after the takeover", n)
	}
	// A comes back: now B holds the lease.
	a.now = b.now
	if n := a.sync(); n != 0 {
		t.Fatalf("old owner copied %d after losing the lease", n)
	}
}

// Manifests of another incarnation (another topic id) are not adopted.
func TestAdoptOnlyOwnIncarnation(t *testing.T) {
	shared := memory.New()
	cfg := DefaultConfig()
	cfg.OwnershipLease = 0
	old := newRig(t, cfg, shared)
	topicID(t, old.dir(), "AAAAAAAAAAAAAAAAAAAAAQ")
	ts := old.now.UnixMilli()
	writeSegment(t, old.dir(), 0, seq(0, 100), same(ts, 100), 10)
	writeSegment(t, old.dir(), 100, nil, nil, 0)
	old.sync()
	fresh := newRig(t, cfg, shared)
	topicID(t, fresh.dir(), "AAAAAAAAAAAAAAAAAAAAAg")
	writeSegment(t, fresh.dir(), 0, seq(0, 100), same(ts, 100), 20)
	writeSegment(t, fresh.dir(), 100, nil, nil, 0)
	fresh.sync()
	fin, _ := fresh.store.FinishedSegments(fresh.tp)
	if len(fin) != 1 || fin[0].TopicID != "AAAAAAAAAAAAAAAAAAAAAg" {
		t.Fatalf("rows %+v", fin)
	}
}

// Remote retention.ms also expires copies of segments without timestamps
// (judged by their copy time), and does not stop at them.
func TestRemoteTimeRetentionWithoutTimestamps(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BrokerOwned = yes(true)
	cfg.Retention.RetentionMs = ptr(3600 * 1000)
	r := newRig(t, cfg, nil)
	writeSegment(t, r.dir(), 0, seq(0, 5), same(-1, 5), 10)
	writeSegment(t, r.dir(), 5, seq(5, 5), same(r.now.UnixMilli(), 5), 10)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	r.sync()
	if st := r.states(); st[remotelog.CopySegmentFinished] != 2 {
		t.Fatalf("states %v", st)
	}
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	if off := r.offsets(); off.LogStartOffset != 10 {
		t.Fatalf("offsets %+v", off)
	}
}

// The sweep deletes interrupted uploads nobody recorded, and keeps whole
// copies (with a manifest) that the store does not know.
func TestSweepKeepsWholeCopies(t *testing.T) {
	shared := memory.New()
	cfg := DefaultConfig()
	cfg.OwnershipLease = 0
	other := newRig(t, cfg, shared)
	ts := other.now.UnixMilli()
	writeSegment(t, other.dir(), 0, seq(0, 10), same(ts, 10), 10)
	writeSegment(t, other.dir(), 10, nil, nil, 0)
	other.sync() // a whole copy the second store will not know
	r := newRig(t, cfg, shared)
	writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 10)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	stray := remotelog.SegmentMetadata{TopicPartition: r.tp, ID: remotelog.NewSegmentID(), StartOffset: 0}
	shared.Upload(context.Background(), r.mgr.Key(stray, ".log"), bytes.NewReader([]byte("half")), 4)
	r.store.EnsurePartition(r.tp, 0) // known partition: no adoption
	if err := r.c.maybeSweep(context.Background(), r.tp); err != nil {
		t.Fatal(err)
	}
	objs := strings.Join(r.objects(), " ")
	if strings.Contains(objs, stray.ID.String()) || strings.Count(objs, ".manifest.json") != 1 {
		t.Fatalf("objects after the sweep: %s", objs)
	}
}

// A tierd taking a lease back reconciles its stale rows with the bucket:
// the other owner's copies are imported, and its own deleted ones retired.
func TestLeaseRetakeReconciles(t *testing.T) {
	shared := memory.New()
	mk := func(broker int32) *rig {
		cfg := DefaultConfig()
		cfg.BrokerOwned, cfg.BrokerID, cfg.OwnershipLease, cfg.CopyTimeout = yes(true), broker, time.Minute, 20*time.Second
		return newRig(t, cfg, shared)
	}
	a, b := mk(1), mk(2)
	ts := a.now.UnixMilli()
	for _, r := range []*rig{a, b} {
		writeSegment(t, r.dir(), 0, seq(0, 100), same(ts, 100), 10)
		writeSegment(t, r.dir(), 100, seq(100, 100), same(ts, 100), 10)
		writeSegment(t, r.dir(), 200, nil, nil, 0)
	}
	a.sync() // A copies 0 and 100
	b.now = b.now.Add(2 * time.Minute)
	for _, base := range []int64{200, 300} {
		os.Remove(filepath.Join(b.dir(), kafkalog.FileName(base, kafkalog.LogSuffix)))
		writeSegment(t, b.dir(), base, seq(base, 100), same(ts, 100), 10)
	}
	writeSegment(t, b.dir(), 400, nil, nil, 0)
	b.sync() // B takes over, copies 200 and 300
	if off := b.offsets(); off.HighestTieredOffset != 399 {
		t.Fatalf("B %+v", off)
	}
	a.now = b.now.Add(2 * time.Minute)
	a.sync() // A takes the lease back
	if off := a.offsets(); off.HighestTieredOffset != 399 {
		t.Fatalf("A after retaking the lease: %+v", off)
	}
	if fin, _ := a.store.FinishedSegments(a.tp); len(fin) != 4 || len(a.objects()) != 20 {
		t.Fatalf("A's rows %d, objects %d", len(fin), len(a.objects()))
	}
}

// With an unreadable manifest the metadata is not rebuilt from the rest
// (which would make whole copies look like orphans): nothing is deleted,
// and the rebuild is retried.
func TestPartialRebuildRefused(t *testing.T) {
	shared := memory.New()
	cfg := DefaultConfig()
	cfg.OwnershipLease = 0
	first := newRig(t, cfg, shared)
	ts := first.now.UnixMilli()
	for b := int64(0); b < 300; b += 100 {
		writeSegment(t, first.dir(), b, seq(b, 100), same(ts, 100), 10)
	}
	writeSegment(t, first.dir(), 300, nil, nil, 0)
	first.sync()
	fin, _ := first.store.FinishedSegments(first.tp)
	bad := first.mgr.Key(fin[1], ".manifest.json")
	shared.Upload(context.Background(), bad, strings.NewReader(`{"formatVersion": 99}`), 21)
	// Pebble lost: a new store over the same log dir and bucket.
	r := newRig(t, cfg, shared)
	r.logDir = first.logDir
	r.c.cfg.LogDirs = []string{first.logDir}
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("a rebuild with an unreadable manifest succeeded")
	}
	if n := len(r.objects()); n != 15 {
		t.Fatalf("%d objects left of 15", n)
	}
}
