package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// A compacted partition's history for TestKafkaCompactedTieredThenCleanedAgain:
// 3000 updates of 120 hot keys and, below offset 2000, 100 cold ones
// (about one in nine a tombstone), batches of 10 offsets, segments of 500
// offsets, the active one at 2500.
const (
	tcUpdates = 3000
	tcKeys    = 120
	tcBatch   = 10
	tcSegment = 500
	tcActive  = 2500
)

// cleanedHistory is a partition's history of updates and what the
// broker's log cleaner leaves of it.
type cleanedHistory struct {
	hist   []batch.Record    // every update, by offset
	latest map[string][]byte // key -> latest value; tombstoned keys absent
}

func newCleanedHistory() *cleanedHistory {
	rng := rand.New(rand.NewPCG(13, 405))
	h := &cleanedHistory{latest: map[string][]byte{}}
	base := int64(1_700_000_000_000)
	for off := range tcUpdates {
		k := rng.IntN(tcKeys)
		if off < 2000 && rng.IntN(4) == 0 {
			k = 200 + rng.IntN(100) // a cold key, not updated after 2000
		}
		key := fmt.Sprintf("key-%03d", k)
		r := batch.Record{Offset: int64(off), Timestamp: base + int64(off), Key: []byte(key)}
		if rng.IntN(9) != 0 {
			r.Value = append([]byte(fmt.Sprintf("%s = value at offset %d|", key, off)), bytes.Repeat([]byte{'v'}, rng.IntN(200))...)
			h.latest[key] = r.Value
		} else {
			delete(h.latest, key)
		}
		h.hist = append(h.hist, r)
	}
	return h
}

// kept reports whether the cleaner, having cleaned every offset below
// upTo, keeps the update at off: at or above upTo, or the last update of
// its key below upTo. Tombstones are kept (their delete horizon has not
// passed), as Kafka's first passes keep them.
func (h *cleanedHistory) kept(off, upTo int64) bool {
	if off >= upTo {
		return true
	}
	k := string(h.hist[off].Key)
	for o := off + 1; o < upTo; o++ {
		if string(h.hist[o].Key) == k {
			return false
		}
	}
	return true
}

// records returns the updates of [lo, hi) the cleaner keeps with every
// offset below upTo cleaned.
func (h *cleanedHistory) records(lo, hi, upTo int64) []batch.Record {
	var out []batch.Record
	for off := lo; off < hi; off++ {
		if h.kept(off, upTo) {
			out = append(out, h.hist[off])
		}
	}
	return out
}

// layout writes the partition directory as the cleaner leaves it with
// every offset below upTo cleaned, in live segments at bases (the last
// one active, to the end of the history): each .log is written aside and
// renamed over the live name, as Kafka's swap does, and the .log files of
// other bases (segments merged away) are removed. The log dir's
// cleaner-offset-checkpoint gets upTo, the first dirty offset.
func (h *cleanedHistory) layout(t *testing.T, logDir, dir string, upTo int64, bases []int64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, b := range bases {
		end := int64(tcUpdates)
		if i+1 < len(bases) {
			end = bases[i+1]
		}
		var data []byte
		for first := b; first < end; first += tcBatch {
			if recs := h.records(first, first+tcBatch, upTo); len(recs) > 0 {
				data = append(data, compactedBatch(first, tcBatch-1, recs)...)
			}
		}
		p := filepath.Join(dir, kafkalog.FileName(b, kafkalog.LogSuffix))
		writeFile(t, p+kafkalog.CleanedSuffix, data)
		if err := os.Rename(p+kafkalog.CleanedSuffix, p); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if f, ok := kafkalog.ParseFileName(e.Name()); ok && f.Live && !slices.Contains(bases, f.BaseOffset) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeFile(t, filepath.Join(dir, "leader-epoch-checkpoint"), []byte("0\n1\n0 0\n"))
	writeFile(t, filepath.Join(logDir, checkpoint.CleanerOffsetFile), []byte(fmt.Sprintf("0\n1\nscan 0 %d\n", upTo)))
}

// tierCompacted runs copier passes over the kworld with topic scan's
// cleanup.policy=compact and local retention lr (retention.ms unlimited)
// until a pass copies nothing, and returns the copier and its registry.
func tierCompacted(w *kworld, lr topics.Retention) (*copier.Copier, *prometheus.Registry) {
	w.t.Helper()
	cfg := copier.DefaultConfig()
	cfg.LogDirs, cfg.FileDeleteDelayMs = []string{w.logDir}, 0
	cfg.BrokerID, cfg.InstanceID = 1, "e2e"
	cfg.Retention.RetentionMs = ptr(-1)
	// Remote compaction would merge the copies this test reads back
	// version by version (remote compaction has tests of its own).
	cfg.RemoteCompaction.Enable = false
	compact := "compact"
	cfg.Topics = map[string]topics.TopicConfig{"scan": {CleanupPolicy: &compact, Retention: lr}}
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := copier.New(cfg, w.store, w.mgr, copier.WithRegisterer(reg), copier.WithLogger(logger.With("component", "copier")))
	if err != nil {
		w.t.Fatal(err)
	}
	for pass := 0; pass < 10; pass++ {
		n, err := c.Sync(context.Background())
		if err != nil {
			w.t.Fatal(err)
		}
		if n == 0 {
			return c, reg
		}
	}
	w.t.Fatal("the copier still copied after 10 passes")
	return nil, nil
}

// tcCounter returns a counter's value from a registry (0 when absent).
func tcCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			n := 0.0
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
			return n
		}
	}
	return 0
}

// tcLocalSize sums the sizes of a partition directory's live .log files.
func tcLocalSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, b := range localLogs(t, dir) {
		st, err := os.Stat(filepath.Join(dir, kafkalog.FileName(b, kafkalog.LogSuffix)))
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// scanCompacted reads partition scan-0 from the start to its end offset
// with a franz-go consumer through the Kafka listener, and checks that
// the records are want (offset by offset: each offset once, in order,
// from the tier that holds it, with its key, value and timestamp) and
// that the key -> latest value map is the history's.
func scanCompacted(t *testing.T, w *kworld, h *cleanedHistory, want []batch.Record) {
	t.Helper()
	kc, err := kgo.NewClient(kgo.SeedBrokers(w.addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"scan": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tp := tpKey{Topic: "scan", Partition: 0}
	if end := listEnd(t, ctx, kc, tp); end != tcUpdates {
		t.Fatalf("end offset %d, want %d", end, tcUpdates)
	}
	state := map[string][]byte{}
	var got []crec
	for len(got) == 0 || got[len(got)-1].offset < tcUpdates-1 {
		fs := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("scan stopped at %d records of %d", len(got), len(want))
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("scan: %v", errs)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if n := len(got); n > 0 && r.Offset <= got[n-1].offset {
				t.Fatalf("offset %d after %d: not once each, in order", r.Offset, got[n-1].offset)
			}
			got = append(got, kgoRecord(r))
			if r.Value == nil {
				delete(state, string(r.Key))
			} else {
				state[string(r.Key)] = r.Value
			}
		})
	}
	if err := sameRecords(got, want); err != nil {
		t.Fatal(err)
	}
	if len(state) != len(h.latest) {
		t.Errorf("rebuilt %d keys, want %d", len(state), len(h.latest))
	}
	for k, v := range h.latest {
		if !bytes.Equal(state[k], v) {
			t.Errorf("key %s: rebuilt %s, want %s", k, short(state[k]), short(v))
		}
	}
}

// TestKafkaCompactedTieredThenCleanedAgain: a compacted topic is tiered
// over MinIO while the broker's cleaner goes on cleaning it, and a
// franz-go scan consumer reads it through the Kafka listener after each
// step.
//
//  1. Offsets below 1000 are cleaned (cleaner-offset-checkpoint 1000):
//     segments 0 and 500 are copied, the others wait (not_cleaned).
//  2. The cleaner cleans below 2000 and merges segments 0 and 500 into
//     one; 1000 and 1500 are copied, and local retention deletes the
//     merged segment on the copies of its offsets (made before the
//     merge, with more records). The scan reads [0, 1000) from the copies,
//     the rest locally.
//  3. The cleaner cleans below 2500: the local segments 1000 and 1500,
//     already copied, are rewritten with fewer records. The pass copies
//     2000, reports no mismatch and no damaged copy. The scan reads
//     [1000, 3000) from the local files (the records cleaned again are
//     gone), [0, 1000) from the copies.
//  4. Local retention deletes every copied segment: the scan reads
//     [0, 2500) from the copies, each made when its segment was cleaned.
//
// Every scan gets each offset once, in order, and the history's key ->
// latest value map.
func TestKafkaCompactedTieredThenCleanedAgain(t *testing.T) {
	t.Parallel()
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "tiercompact")
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure = srv.Endpoint, "tiercompact", true
	b, err := minio.New(mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newKWorldOn(t, b, t.TempDir())
	h := newCleanedHistory()
	// Each cleaning removes records the previous one kept, so a scan
	// tells which version of a range it read.
	for _, c := range [][3]int64{{0, 1000, 2000}, {1000, 2000, tcActive}} {
		if a, b := len(h.records(c[0], c[1], c[1])), len(h.records(c[0], c[1], c[2])); b >= a || b == 0 {
			t.Fatalf("[%d, %d): %d records cleaned below %d, %d below %d: the history does not tell the versions apart", c[0], c[1], a, c[1], b, c[2])
		}
	}
	dir := filepath.Join(w.logDir, "scan-0")
	var want []batch.Record
	region := func(lo, hi, upTo int64) { want = append(want, h.records(lo, hi, upTo)...) }

	// 1. Cleaned below 1000.
	h.layout(t, w.logDir, dir, 1000, []int64{0, 500, 1000, 1500, 2000, tcActive})
	c, reg := tierCompacted(w, topics.Retention{LocalRetentionMs: ptr(-1)})
	if o := w.offsets("scan", 0); o.HighestTieredOffset != 999 {
		t.Fatalf("step 1: tiered %+v, want up to 999", o)
	}
	if st := tcStatus(t, c); st.Reason != remotelog.WaitNotCleaned || st.PendingSegments != 3 {
		t.Fatalf("step 1: status %s/%s %q", st.State, st.Reason, st.Detail)
	}
	want = nil
	region(0, tcUpdates, 1000)
	scanCompacted(t, w, h, want)

	// 2. Cleaned below 2000, segments 0 and 500 merged; the merged
	// segment goes locally.
	h.layout(t, w.logDir, dir, 2000, []int64{0, 1000, 1500, 2000, tcActive})
	first, err := os.Stat(filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	if first.Size() == 0 {
		t.Fatal("step 2: the merged segment was cleaned empty; the history needs keys it alone holds")
	}
	limit := topics.Retention{LocalRetentionBytes: ptr(tcLocalSize(t, dir) - first.Size())}
	_, reg = tierCompacted(w, limit)
	if o := w.offsets("scan", 0); o.HighestTieredOffset != 1999 || o.LocalLogStartOffset != 1000 || o.LogStartOffset != 0 {
		t.Fatalf("step 2: offsets %+v", o)
	}
	if got := localLogs(t, dir); !slices.Equal(got, []int64{1000, 1500, 2000, tcActive}) {
		t.Fatalf("step 2: local segments %v", got)
	}
	if n := tcCounter(t, reg, "tierd_copier_mismatched_segments_total"); n != 0 {
		t.Fatalf("step 2: %v mismatches for the merged segment", n)
	}
	want = nil
	region(0, 1000, 1000) // the copies of step 1
	region(1000, tcUpdates, 2000)
	scanCompacted(t, w, h, want)

	// 3. Cleaned below 2500: the copied local segments 1000 and 1500 are
	// cleaned again.
	h.layout(t, w.logDir, dir, tcActive, []int64{1000, 1500, 2000, tcActive})
	c, reg = tierCompacted(w, limit)
	if o := w.offsets("scan", 0); o.HighestTieredOffset != tcActive-1 || o.LocalLogStartOffset != 1000 {
		t.Fatalf("step 3: offsets %+v", o)
	}
	if n := tcCounter(t, reg, "tierd_copier_mismatched_segments_total"); n != 0 {
		t.Fatalf("step 3: %v mismatches for segments the cleaner rewrote", n)
	}
	if st := tcStatus(t, c); st.State != remotelog.TierUpToDate || st.DamagedCopies != 0 || st.RemoteSegments != 5 {
		t.Fatalf("step 3: status %s/%s %q, %d damaged, %d copies", st.State, st.Reason, st.Detail, st.DamagedCopies, st.RemoteSegments)
	}
	want = nil
	region(0, 1000, 1000)
	region(1000, tcUpdates, tcActive) // local, as cleaned again
	scanCompacted(t, w, h, want)

	// 4. Every copied segment goes locally.
	tierCompacted(w, topics.Retention{LocalRetentionMs: ptr(0)})
	if got := localLogs(t, dir); !slices.Equal(got, []int64{tcActive}) {
		t.Fatalf("step 4: local segments %v", got)
	}
	want = nil
	region(0, 1000, 1000)
	region(1000, 2000, 2000)
	region(2000, tcUpdates, tcActive)
	scanCompacted(t, w, h, want)
	t.Logf("%d updates of %d hot and 100 cold keys; %d live keys; the final scan read %d records", tcUpdates, tcKeys, len(h.latest), len(want))
}

// tcStatus returns scan-0's status from the copier's last pass.
func tcStatus(t *testing.T, c *copier.Copier) remotelog.PartitionStatus {
	t.Helper()
	for _, p := range c.Status().Partitions {
		if p.Topic == "scan" && p.Partition == 0 {
			return p
		}
	}
	t.Fatal("no status for scan-0")
	return remotelog.PartitionStatus{}
}
