package copier

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/filesystem"
)

// compactRig is a rig over a filesystem bucket whose topic orders has
// cleanup.policy policy, retention unlimited unless the test sets it,
// with three rolled segments of ten offsets (0, 10, 20) and an active one
// at 30, all an hour old.
func compactRig(t *testing.T, policy string) *rig {
	t.Helper()
	b, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.RetentionMs, cfg.Retention.LocalRetentionMs = ptr(-1), ptr(-1)
	cfg.Topics = map[string]topics.TopicConfig{"orders": {CleanupPolicy: &policy}}
	r := newRig(t, cfg, b)
	ts := r.now.Add(-time.Hour).UnixMilli()
	for base := int64(0); base < 30; base += 10 {
		writeSegment(t, r.dir(), base, seq(base, 10), same(ts, 10), 20)
	}
	writeSegment(t, r.dir(), 30, seq(30, 2), same(ts, 2), 20)
	return r
}

// writeCleanerCheckpoint writes the log dir's cleaner-offset-checkpoint
// as Kafka's LogCleanerManager does (version 0, count, entries).
func writeCleanerCheckpoint(t *testing.T, logDir string, entries map[remotelog.TopicPartition]int64) {
	t.Helper()
	s := fmt.Sprintf("0\n%d\n", len(entries))
	for tp, off := range entries {
		s += fmt.Sprintf("%s %d %d\n", tp.Topic, tp.Partition, off)
	}
	writeFile(t, filepath.Join(logDir, checkpoint.CleanerOffsetFile), s)
}

// finished returns the finished rows of the rig's partition, oldest first.
func (r *rig) finished() []remotelog.SegmentMetadata {
	r.t.Helper()
	fin, err := r.store.FinishedSegments(r.tp)
	if err != nil {
		r.t.Fatal(err)
	}
	return fin
}

// TestCompactedWaitsForCleaner: a compacted topic's rolled segment is
// copied only once its whole range lies below the partition's entry in
// cleaner-offset-checkpoint. Without the file, without an entry, and with
// an entry past the active segment (which Kafka's cleaner never writes),
// nothing is copied and the status waits for not_cleaned, saying which;
// with the entry at 20 the segments 0 and 10 are copied and 20 waits;
// Evaluate (a stopped tierd) says the same. The copies' rows and
// manifests say compacted.
func TestCompactedWaitsForCleaner(t *testing.T) {
	r := compactRig(t, "compact")
	other := remotelog.TopicPartition{Topic: "payments", Partition: 0}
	for _, step := range []struct {
		name  string
		write func()
		want  string
	}{
		{"no file", func() {}, "has no " + filepath.Join(r.logDir, checkpoint.CleanerOffsetFile)},
		{"no entry", func() { writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{other: 500}) }, "has no entry"},
		{"past the active segment", func() { writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{r.tp: 40}) }, "past the active segment's base offset 30"},
	} {
		step.write()
		if n := r.sync(); n != 0 {
			t.Fatalf("%s: %d copied before the cleaner passed anything", step.name, n)
		}
		st := r.status(r.tp)
		if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitNotCleaned || !strings.Contains(st.Detail, step.want) || st.PendingSegments != 3 {
			t.Fatalf("%s: status %s/%s %q (%d pending), want not_cleaned saying %q", step.name, st.State, st.Reason, st.Detail, st.PendingSegments, step.want)
		}
	}

	writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{r.tp: 20, other: 7})
	if n := r.sync(); n != 2 {
		t.Fatalf("copied %d with the cleaner checkpoint at 20, want segments 0 and 10", n)
	}
	st := r.status(r.tp)
	if st.Reason != remotelog.WaitNotCleaned || !strings.Contains(st.Detail, "first dirty offset") || !strings.Contains(st.Detail, "is 20") || st.HighestTieredOffset != 19 {
		t.Fatalf("status %s %q, highest tiered %d", st.Reason, st.Detail, st.HighestTieredOffset)
	}
	ev, err := Evaluate(r.c.cfg, r.store, r.now)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Partitions) != 1 || ev.Partitions[0].Reason != remotelog.WaitNotCleaned {
		t.Fatalf("Evaluate: %+v", ev.Partitions)
	}
	fin := r.finished()
	if len(fin) != 2 || !fin[0].Compacted || !fin[1].Compacted {
		t.Fatalf("finished rows %+v, want two compacted", fin)
	}
	mfs, err := r.mgr.Manifests(context.Background(), r.tp)
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 2 || !mfs[0].Compacted || !mfs[1].Compacted {
		t.Fatalf("manifests: %d, want two compacted", len(mfs))
	}

	writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{r.tp: 30})
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d with the cleaner checkpoint at the active segment, want segment 20", n)
	}
	if st := r.status(r.tp); st.State != remotelog.TierUpToDate {
		t.Fatalf("status %s/%s %q", st.State, st.Reason, st.Detail)
	}
}

// TestCompactedSwitchedToDelete: a topic switched from compact to delete
// copies its segments without a cleaner checkpoint (its cleaner no longer
// runs), and the copies are not marked compacted; one switched to compact
// waits for its first cleaning.
func TestCompactedSwitchedToDelete(t *testing.T) {
	r := compactRig(t, "compact")
	if n := r.sync(); n != 0 {
		t.Fatalf("copied %d", n)
	}
	del := "delete"
	r.c.cfg.Topics["orders"] = topics.TopicConfig{CleanupPolicy: &del}
	if n := r.sync(); n != 3 {
		t.Fatalf("copied %d after the switch to delete, want 3", n)
	}
	for _, row := range r.finished() {
		if row.Compacted {
			t.Fatalf("row of a delete topic marked compacted: %+v", row)
		}
	}
	if st := r.status(r.tp); st.State != remotelog.TierUpToDate {
		t.Fatalf("status %s/%s", st.State, st.Reason)
	}
}

// TestCompactedRewrittenAfterCopy: the broker's cleaner rewrites local
// segments after their copies (segment 0 cleaned again with fewer
// records; segments 10 and 20 merged into one at 10). The pass is no
// error, reports no mismatch, marks no copy damaged and copies nothing
// again; the three copies stay as they were. Local retention then deletes
// the rewritten segments, the copies of their offsets being the proof. A
// topic that is not compacted treats the same rewrite as a mismatch and
// keeps the segment.
func TestCompactedRewrittenAfterCopy(t *testing.T) {
	r := compactRig(t, "compact")
	writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{r.tp: 30})
	if n := r.sync(); n != 3 {
		t.Fatalf("copied %d, want 3", n)
	}
	before := r.finished()
	objects := r.objects()

	ts := r.now.Add(-time.Hour).UnixMilli()
	writeSegment(t, r.dir(), 0, []int64{0, 5, 9}, same(ts, 3), 20)
	for _, suffix := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
		if err := os.Remove(filepath.Join(r.dir(), kafkalog.FileName(20, suffix))); err != nil {
			t.Fatal(err)
		}
	}
	writeSegment(t, r.dir(), 10, []int64{12, 25, 29}, same(ts, 3), 20)
	for pass := 0; pass < 2; pass++ {
		if n := r.sync(); n != 0 {
			t.Fatalf("copied %d after the rewrite", n)
		}
	}
	if got := testutilCounter(t, r.c.m.mismatch); got != 0 {
		t.Fatalf("%v mismatches reported for segments the cleaner rewrote", got)
	}
	if err := r.c.audit.checkCopies(context.Background(), []remotelog.TopicPartition{r.tp}); err != nil {
		t.Fatal(err)
	}
	after := r.finished()
	if !reflect.DeepEqual(after, before) || !reflect.DeepEqual(r.objects(), objects) {
		t.Fatalf("copies changed after the rewrite:\n%+v\n%+v", before, after)
	}
	if st := r.status(r.tp); st.State != remotelog.TierUpToDate || st.DamagedCopies != 0 {
		t.Fatalf("status %s/%s %q, %d damaged", st.State, st.Reason, st.Detail, st.DamagedCopies)
	}

	// Local retention: the copies of their offsets let the rewritten
	// segments go; the copies stay.
	r.c.cfg.Topics["orders"] = topics.TopicConfig{CleanupPolicy: ptrStr("compact"), Retention: topics.Retention{LocalRetentionMs: ptr(0)}}
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{30}) {
		t.Fatalf("local segments %v, want only the active one", got)
	}
	if o := r.offsets(); o.LocalLogStartOffset != 30 || o.LogStartOffset != 0 {
		t.Fatalf("offsets %+v", o)
	}
	if got := r.finished(); len(got) != 3 {
		t.Fatalf("%d finished copies, want 3", len(got))
	}

	// The same rewrite on a topic that is not compacted: a mismatch, kept.
	// The broker's cleaner checkpoint names the partition: the mismatch's
	// log line says the topic looks compacted to its cleaner.
	d := compactRig(t, "delete")
	logs, _ := d.observe()
	writeCleanerCheckpoint(t, d.logDir, map[remotelog.TopicPartition]int64{d.tp: 30})
	if n := d.sync(); n != 3 {
		t.Fatalf("copied %d", n)
	}
	writeSegment(t, d.dir(), 0, []int64{0, 5, 9}, same(ts, 3), 20)
	d.c.cfg.Topics["orders"] = topics.TopicConfig{Retention: topics.Retention{LocalRetentionMs: ptr(0)}}
	d.sync()
	if got := testutilCounter(t, d.c.m.mismatch); got != 1 {
		t.Fatalf("%v mismatches for a rewritten segment of a delete topic, want 1", got)
	}
	if recs := logs.with("differs from the tiered copy"); len(recs) != 1 || !strings.Contains(recs[0].attrs["hint"], "set cleanup.policy: compact") {
		t.Fatalf("mismatch log lines %+v, want one with the cleanup.policy hint", recs)
	}
	if got := d.localBases(); !reflect.DeepEqual(got, []int64{0, 10, 20, 30}) {
		t.Fatalf("local segments %v, want all kept (deletion stops at the changed segment)", got)
	}
}

// TestCompactOnlyKeepsRemoteCopies: with cleanup.policy=compact,
// retention.ms deletes no remote copy (Kafka deletes nothing of a
// compact-only log by retention) while local.retention.ms still removes
// local segments with finished copies; with compact,delete, retention.ms
// applies on top, as in Kafka.
func TestCompactOnlyKeepsRemoteCopies(t *testing.T) {
	for _, tc := range []struct {
		policy string
		remote int // finished copies left
	}{{"compact", 3}, {"compact,delete", 0}} {
		t.Run(tc.policy, func(t *testing.T) {
			r := compactRig(t, tc.policy)
			writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{r.tp: 30})
			r.c.cfg.Topics["orders"] = topics.TopicConfig{CleanupPolicy: ptrStr(tc.policy), Retention: topics.Retention{RetentionMs: ptr(60_000), LocalRetentionMs: ptr(-2)}}
			r.sync()
			r.sync()
			if got := r.localBases(); !reflect.DeepEqual(got, []int64{30}) {
				t.Fatalf("local segments %v, want only the active one", got)
			}
			if got := r.finished(); len(got) != tc.remote {
				t.Fatalf("%d finished copies, want %d", len(got), tc.remote)
			}
			if o := r.offsets(); (tc.remote == 3) != (o.LogStartOffset == 0) {
				t.Fatalf("offsets %+v", o)
			}
		})
	}
}

// TestCompactedCleanerSwapping: while the directory holds a ".swap" file
// (the cleaner replacing segments), no segment of the compacted topic is
// copied: the pass waits for not_cleaned without an error and leaves no
// row or object; once the swap is done, the copy is made.
func TestCompactedCleanerSwapping(t *testing.T) {
	r := compactRig(t, "compact")
	writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{r.tp: 30})
	swap := filepath.Join(r.dir(), kafkalog.FileName(10, kafkalog.LogSuffix)+kafkalog.CleanedSuffix)
	writeFile(t, swap, "")
	if n := r.sync(); n != 0 {
		t.Fatalf("copied %d while the cleaner swaps segments", n)
	}
	if st := r.status(r.tp); st.Reason != remotelog.WaitNotCleaned || !strings.Contains(st.Detail, "next pass") {
		t.Fatalf("status %s %q", st.Reason, st.Detail)
	}
	if rows, _ := r.store.Segments(r.tp); len(rows) != 0 || len(r.objects()) != 0 {
		t.Fatalf("rows %v, objects %v", rows, r.objects())
	}
	if err := os.Remove(swap); err != nil {
		t.Fatal(err)
	}
	if n := r.sync(); n != 3 {
		t.Fatalf("copied %d after the swap, want 3", n)
	}
}

// TestValidateCleanupPolicy: Validate reports a bad log.cleanup.policy
// and a bad cleanup.policy of a topic's entry.
func TestValidateCleanupPolicy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogDirs = []string{"/x"}
	cfg.LogCleanupPolicy = "compress"
	cfg.Topics = map[string]topics.TopicConfig{"orders": {CleanupPolicy: ptrStr("")}}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "log.cleanup.policy") || !strings.Contains(err.Error(), "orders: cleanup.policy") {
		t.Fatalf("Validate: %v", err)
	}
}

func ptrStr(s string) *string { return &s }

// TestKafkaCleanupPolicyFromCluster: cleanup.policy=compact set on the
// topic in the Kafka cluster (kfake, altered through kadm) overrides
// tierd.yaml's delete: nothing is copied before the cleaner checkpoint
// passes the segments, and the copies are then compacted.
func TestKafkaCleanupPolicyFromCluster(t *testing.T) {
	k := newKafkaRig(t)
	id := k.create(t, 1)
	r := k.tierdFor(t, 1, nil)
	topicID(t, r.dir(), id)
	ts := r.now.UnixMilli()
	for base := int64(0); base < 30; base += 10 {
		writeSegment(t, r.dir(), base, seq(base, 10), same(ts, 10), 10)
	}
	writeSegment(t, r.dir(), 30, nil, nil, 0)
	v := "compact"
	res, err := k.adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "cleanup.policy", Value: &v}}, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res {
		if x.Err != nil {
			t.Fatal(x.Err)
		}
	}
	if n := r.sync(); n != 0 {
		t.Fatalf("copied %d of a topic the cluster says is compacted, with no cleaner checkpoint", n)
	}
	if st := r.status(r.tp); st.Reason != remotelog.WaitNotCleaned || !strings.Contains(st.Detail, "cleanup.policy=compact") {
		t.Fatalf("status %s %q", st.Reason, st.Detail)
	}
	writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{r.tp: 30})
	if n := r.sync(); n != 3 {
		t.Fatalf("copied %d once cleaned, want 3", n)
	}
	for _, row := range r.finished() {
		if !row.Compacted || row.TopicID != id {
			t.Fatalf("row %+v", row)
		}
	}
}

// TestCompactedDamagedCopyRecopied: a copy marked damaged whose local
// segment the cleaner rewrote since is copied again from the rewritten
// segment (same offsets, other size), and the new copy supersedes the
// damaged one, which goes.
func TestCompactedDamagedCopyRecopied(t *testing.T) {
	r := compactRig(t, "compact")
	writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{r.tp: 30})
	if n := r.sync(); n != 3 {
		t.Fatalf("copied %d, want 3", n)
	}
	old := r.finished()[0]
	if _, err := r.store.MarkDamaged(r.tp, old.StartOffset, old.ID, damagedChecksum+"test"); err != nil {
		t.Fatal(err)
	}
	size := writeSegment(t, r.dir(), 0, []int64{3, 9}, same(r.now.Add(-time.Hour).UnixMilli(), 2), 20)
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d, want segment 0 again", n)
	}
	r.sync() // remote retention deletes the superseded copy
	fin := r.finished()
	if len(fin) != 3 || fin[0].ID == old.ID || fin[0].StartOffset != 0 || fin[0].SizeInBytes != size || fin[0].Damaged != "" {
		t.Fatalf("finished %+v", fin)
	}
	if row, err := r.store.Segment(r.tp, old.StartOffset, old.ID); err != nil || row.State != remotelog.DeleteSegmentFinished {
		t.Fatalf("damaged copy: %+v %v", row, err)
	}
}
