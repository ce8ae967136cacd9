package filesystem_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// scaleSizes are the bucket sizes, in partitions, of the growth
// benchmarks: each tenfold step should cost a partition's listing
// nothing more.
var scaleSizes = []int{100, 1000, 10000}

// BenchmarkPartitionListing lists one partition's objects (Iter) and its
// incomplete uploads (IncompleteUploads) in buckets of 100, 1,000 and
// 10,000 partitions of one copy (seven objects) each. Besides ns/op every
// case reports x-vs-100: its time per listing divided by that of the
// 100-partition case of the same run, the growth a listing should not
// have (about 1 when a listing reads only the partition's directory).
func BenchmarkPartitionListing(b *testing.B) {
	ctx := context.Background()
	type fixture struct {
		bucket *filesystem.Bucket
		mgr    *rsm.Manager
		mid    string // a partition in the middle, by name
	}
	fixtures := map[int]fixture{}
	for _, n := range scaleSizes {
		dir := b.TempDir()
		bk, err := filesystem.New(filesystem.Config{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		m, err := rsm.NewManager(bk, rsm.Config{Prefix: "tiered"})
		if err != nil {
			b.Fatal(err)
		}
		tps := rsmtest.Partitions("orders", n)
		rsmtest.SeedCopies(b, dir, m, tps, 1)
		fixtures[n] = fixture{bk, m, m.PartitionPrefix(tps[n/2])}
	}
	for _, op := range []struct {
		name string
		run  func(f fixture) (int, error)
	}{
		{"Iter", func(f fixture) (int, error) {
			n := 0
			err := f.bucket.Iter(ctx, f.mid, func(string) error { n++; return nil })
			return n, err
		}},
		{"IncompleteUploads", func(f fixture) (int, error) {
			ups, err := f.bucket.IncompleteUploads(ctx, f.mid)
			return len(ups) + len(rsmtest.CopySuffixes), err // none expected
		}},
	} {
		var base float64 // ns per listing of the 100-partition case
		for _, n := range scaleSizes {
			b.Run(fmt.Sprintf("%s/partitions=%d", op.name, n), func(b *testing.B) {
				f := fixtures[n]
				for i := 0; i < b.N; i++ {
					got, err := op.run(f)
					if err != nil || got != len(rsmtest.CopySuffixes) {
						b.Fatalf("%s of %s: %d keys, %v; want %d", op.name, f.mid, got, err, len(rsmtest.CopySuffixes))
					}
				}
				perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if n == scaleSizes[0] {
					base = perOp
				}
				if base > 0 {
					b.ReportMetric(perOp/base, "x-vs-100")
				}
			})
		}
	}
}
