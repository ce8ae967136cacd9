package remoteread

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
)

// lookupSegment is the metadata part of a Fetch: the partition's snapshot
// and the finished copy holding offset. It returns the copy's start offset.
func lookupSegment(s *Engine, tp remotelog.TopicPartition, offset int64) (int64, error) {
	_, fin, err := s.partitionState(tp)
	if err != nil {
		return 0, err
	}
	p := fin.seek(offset)
	if !p.ok() {
		return 0, fmt.Errorf("offset %d not found", offset)
	}
	return p.row().StartOffset, nil
}

// benchRow is a finished copy of 100 offsets from start, as the copier
// writes it.
func benchRow(tp remotelog.TopicPartition, start int64) remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: start, EndOffset: start + 99,
		MaxTimestampMs: 1_700_000_000_000 + start, SegmentLeaderEpochs: []remotelog.EpochEntry{{Epoch: 3, StartOffset: start}},
		SizeInBytes: 1 << 20, State: remotelog.CopySegmentStarted, BrokerID: 1, InstanceID: "bench"}
}

// BenchmarkFetchMetadataLookup measures the metadata part of a Fetch at a
// random offset of a partition with 1,000 to 100,000 finished copies:
// right after the copier's writes to the same partition (a new copy
// finished, the oldest one's deletion started), and again with nothing
// changed. It reports both times and their ratio (the target is <= 2),
// in wall time and in the CPU time of the reading thread, and the time of
// a look-up in another partition right after the writes (which must not
// pay for them).
func BenchmarkFetchMetadataLookup(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("copies=%d", n), func(b *testing.B) {
			store, err := rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem()))
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			tp := remotelog.TopicPartition{Topic: "bench", Partition: 0}
			var rows []remotelog.SegmentMetadata
			for i := 0; i < n; i++ {
				m := benchRow(tp, int64(i)*100)
				m.State = remotelog.CopySegmentFinished
				if err := store.ImportSegment(m); err != nil {
					b.Fatal(err)
				}
				rows = append(rows, m)
			}
			other := remotelog.TopicPartition{Topic: "bench", Partition: 1} // a partition the writes leave alone
			for i := int64(0); i < 100; i++ {
				m := benchRow(other, i*100)
				m.State = remotelog.CopySegmentFinished
				if err := store.ImportSegment(m); err != nil {
					b.Fatal(err)
				}
			}
			srv, err := New(DefaultConfig(), store, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			runtime.LockOSThread() // for threadCPU
			defer runtime.UnlockOSThread()
			lookup := func() (wall, cpu time.Duration) {
				lo, hi := rows[0].StartOffset, rows[len(rows)-1].EndOffset
				t0, c0 := time.Now(), threadCPU()
				if _, err := lookupSegment(srv, tp, lo+rng.Int64N(hi-lo+1)); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0), threadCPU() - c0
			}
			lookupOther := func() time.Duration {
				t0 := time.Now()
				if _, err := lookupSegment(srv, other, rng.Int64N(100*100)); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			lookup() // the first loads
			lookupOther()
			loads := testutil.ToFloat64(srv.meta.loads)
			var after, cached, afterCPU, cachedCPU, others time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				m := benchRow(tp, rows[len(rows)-1].EndOffset+1)
				if err := store.AddSegment(m); err != nil {
					b.Fatal(err)
				}
				if _, err := store.UpdateState(tp, m.StartOffset, m.ID, remotelog.CopySegmentFinished); err != nil {
					b.Fatal(err)
				}
				if _, err := store.UpdateState(tp, rows[0].StartOffset, rows[0].ID, remotelog.DeleteSegmentStarted); err != nil {
					b.Fatal(err)
				}
				rows = append(rows[1:], m)
				b.StartTimer()
				others += lookupOther()
				w, c := lookup()
				after, afterCPU = after+w, afterCPU+c
				w, c = lookup()
				cached, cachedCPU = cached+w, cachedCPU+c
			}
			b.StopTimer()
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
			b.ReportMetric(per(after), "after-write-ns/lookup")
			b.ReportMetric(per(cached), "cached-ns/lookup")
			b.ReportMetric(float64(after)/float64(max(cached, 1)), "after/cached")
			b.ReportMetric(per(others), "other-partition-after-write-ns/lookup")
			b.ReportMetric(per(afterCPU), "after-write-cpu-ns/lookup")
			b.ReportMetric(per(cachedCPU), "cached-cpu-ns/lookup")
			b.ReportMetric(float64(afterCPU)/float64(max(cachedCPU, 1)), "cpu-after/cached")
			b.ReportMetric(testutil.ToFloat64(srv.meta.loads)-loads, "full-loads")
		})
	}
}

// BenchmarkFinListApply measures one update of a partition's finished
// rows alone (a new copy finished, the oldest deleted), without the
// metadata store, at 1,000 to 100,000 copies.
func BenchmarkFinListApply(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("copies=%d", n), func(b *testing.B) {
			tp := remotelog.TopicPartition{Topic: "bench", Partition: 0}
			rows := make([]remotelog.SegmentMetadata, n)
			for i := range rows {
				rows[i] = benchRow(tp, int64(i)*100)
			}
			l := newFinList(rows)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0 := threadCPU()
			defer func() { b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op") }()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := benchRow(tp, int64(n+i)*100)
				old := rows[i%n] // rows is a ring of the copies in the list
				rows[i%n] = m
				l = l.apply([]remotelog.FinishedOp{{StartOffset: m.StartOffset, ID: m.ID, Row: &m}, {StartOffset: old.StartOffset, ID: old.ID}})
			}
		})
	}
}
