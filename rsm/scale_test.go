package rsm_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// deleteCopies deletes rows, copies of one partition, the way the
// copier's retention does: each copy's objects by key, then the
// incomplete uploads of all of them, once.
func deleteCopies(ctx context.Context, m *rsm.Manager, rows []remotelog.SegmentMetadata) error {
	ids := map[remotelog.SegmentID]bool{}
	for _, r := range rows {
		if err := m.DeleteSegment(ctx, r); err != nil {
			return err
		}
		ids[r.ID] = true
	}
	if len(rows) == 0 {
		return nil
	}
	_, err := m.AbortUploads(ctx, rows[0].TopicPartition, ids)
	return err
}

// seededBucket returns a filesystem bucket holding n copies of one
// partition (seven objects each), counted, with a manager over it, and
// the copies' rows, oldest first.
func seededBucket(tb testing.TB, n int) (*rsmtest.CountingBucket, *rsm.Manager, []remotelog.SegmentMetadata) {
	tb.Helper()
	dir := tb.TempDir()
	fs, err := filesystem.New(filesystem.Config{Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	cb := rsmtest.Count(fs)
	m, err := rsm.NewManager(cb, rsm.Config{Prefix: "tiered"})
	if err != nil {
		tb.Fatal(err)
	}
	rows := rsmtest.SeedCopies(tb, dir, m, rsmtest.Partitions("orders", 1), n)
	return cb, m, rows
}

// TestDeleteRequestsPerCopy deletes the older half of 100 and of 1,000
// copies of one partition through the manager's delete path, on the
// filesystem bucket, counting the bucket calls: exactly seven deletes per
// copy (its objects, by key), and the same number of listings for both,
// at most one (the partition's incomplete uploads): the copies' keys come
// from their rows, so a delete lists nothing per copy. Afterwards exactly
// the other half's objects are left.
func TestDeleteRequestsPerCopy(t *testing.T) {
	ctx := context.Background()
	listings := map[int]int{}
	for _, n := range []int{100, 1000} {
		cb, m, rows := seededBucket(t, n)
		cb.Reset()
		if err := deleteCopies(ctx, m, rows[:n/2]); err != nil {
			t.Fatal(err)
		}
		calls := cb.Calls()
		if calls["Delete"] != 7*n/2 {
			t.Errorf("%d copies: %d deletes for %d copies, want 7 each (%s)", n, calls["Delete"], n/2, cb)
		}
		listings[n] = cb.Listings()
		if listings[n] > 1 {
			t.Errorf("%d copies: %d listings to delete %d copies of one partition, want at most 1 (%s)", n, listings[n], n/2, cb)
		}
		left := 0
		if err := m.Bucket().Iter(ctx, "", func(k string) error {
			if _, id, _, ok := rsm.ParseKey(k); !ok || !containsID(rows[n/2:], id) {
				t.Errorf("%d copies: %s left", n, k)
			}
			left++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if left != 7*(n-n/2) {
			t.Errorf("%d copies: %d objects left, want %d", n, left, 7*(n-n/2))
		}
	}
	if listings[100] != listings[1000] {
		t.Errorf("listings grew with the copies deleted: %v", listings)
	}
}

func containsID(rows []remotelog.SegmentMetadata, id remotelog.SegmentID) bool {
	for _, r := range rows {
		if r.ID == id {
			return true
		}
	}
	return false
}

// BenchmarkDeleteCopies deletes the older half of 1,000 and of 10,000
// copies of one partition on the filesystem bucket through the manager's
// delete path. It reports ns per deleted copy (wall time), cpu-ns per
// deleted copy (user and system CPU of the process), bucket calls
// (requests) and listings per deleted copy, and x-vs-1000 and
// cpu-x-vs-1000: the wall and CPU time per deleted copy divided by those
// of the 1,000-copy case of the same run, which should stay near 1.
func BenchmarkDeleteCopies(b *testing.B) {
	ctx := context.Background()
	var base, cpuBase float64
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("copies=%d", n), func(b *testing.B) {
			var requests, listings int
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				cb, m, rows := seededBucket(b, n)
				cb.Reset()
				before := cpuTime(b)
				b.StartTimer()
				if err := deleteCopies(ctx, m, rows[:n/2]); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cpuTime(b) - before
				b.StartTimer()
				for _, c := range cb.Calls() {
					requests += c
				}
				listings += cb.Listings()
			}
			deleted := float64(b.N * (n / 2))
			perCopy := float64(b.Elapsed().Nanoseconds()) / deleted
			cpuPerCopy := float64(cpu.Nanoseconds()) / deleted
			if n == 1000 {
				base, cpuBase = perCopy, cpuPerCopy
			}
			b.ReportMetric(perCopy, "ns/copy")
			b.ReportMetric(cpuPerCopy, "cpu-ns/copy")
			b.ReportMetric(float64(requests)/deleted, "requests/copy")
			b.ReportMetric(float64(listings)/deleted, "listings/copy")
			if base > 0 && cpuBase > 0 {
				b.ReportMetric(perCopy/base, "x-vs-1000")
				b.ReportMetric(cpuPerCopy/cpuBase, "cpu-x-vs-1000")
			}
		})
	}
}

// cpuTime returns the user and system CPU time the process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSweepEveryPartition runs SweepPartition (one listing of the
// partition's objects and one of its incomplete uploads; every copy kept)
// over every partition of a filesystem bucket of 100 and of 1,000
// partitions of three copies each: what the copier's first pass after a
// start does. It reports CPU time per partition swept (cpu-ns/partition)
// and cpu-x-vs-100, that time divided by the 100-partition case's of the
// same run, which should stay near 1 (the whole pass grows linearly).
func BenchmarkSweepEveryPartition(b *testing.B) {
	ctx := context.Background()
	var cpuBase float64
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			b.StopTimer()
			dir := b.TempDir()
			fs, err := filesystem.New(filesystem.Config{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			m, err := rsm.NewManager(fs, rsm.Config{Prefix: "tiered"})
			if err != nil {
				b.Fatal(err)
			}
			tps := rsmtest.Partitions("orders", n)
			rsmtest.SeedCopies(b, dir, m, tps, 3)
			before := cpuTime(b)
			b.StartTimer()
			for i := 0; i < b.N; i++ {
				for _, tp := range tps {
					seen := 0
					if _, err := m.SweepPartition(ctx, tp, func(remotelog.SegmentID, bool) bool { seen++; return true }); err != nil || seen != 3 {
						b.Fatalf("sweep %s: %d copies, %v", tp, seen, err)
					}
				}
			}
			b.StopTimer()
			perPartition := float64((cpuTime(b) - before).Nanoseconds()) / float64(b.N*n)
			if n == 100 {
				cpuBase = perPartition
			}
			b.ReportMetric(perPartition, "cpu-ns/partition")
			if cpuBase > 0 {
				b.ReportMetric(perPartition/cpuBase, "cpu-x-vs-100")
			}
		})
	}
}
