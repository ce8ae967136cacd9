package copier

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/memory"
)

const (
	idA = "4zeO1mdxSb69f7lqENDdVA"
	idB = "ovfMbBAzRYywKfHoGhhRuQ"
)

// tieredTwo writes two rolled segments and an active one under topic id
// (none when ""), tiers them and returns the sorted object keys.
func tieredTwo(t *testing.T, r *rig, id string) []string {
	t.Helper()
	if id != "" {
		topicID(t, r.dir(), id)
	}
	ts := r.now.UnixMilli()
	writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 10)
	writeSegment(t, r.dir(), 10, seq(10, 10), same(ts, 10), 10)
	writeSegment(t, r.dir(), 20, nil, nil, 0)
	if n := r.sync(); n != 2 {
		t.Fatalf("copied %d, want 2", n)
	}
	objs := r.objects()
	sort.Strings(objs)
	if len(objs) != 10 {
		t.Fatalf("objects %v", objs)
	}
	return objs
}

func (r *rig) journal() []string {
	r.t.Helper()
	j, err := r.store.Journal(0, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, e := range j {
		out = append(out, e.Event)
	}
	return out
}

func (r *rig) sortedObjects() []string {
	o := r.objects()
	sort.Strings(o)
	return o
}

// A "<topic>-<p>.<uuid>-delete" directory is left by topic deletion, but
// also by a move to another log dir, a reassignment or a removed replica:
// it deletes nothing, and nothing is journaled.
func TestDeleteDirDeletesNothing(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	objs := tieredTwo(t, r, idA)
	if err := os.Rename(r.dir(), r.dir()+".2308294e39dc4a44ab8183f587805af2-delete"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		r.now = r.now.Add(48 * time.Hour)
		r.sync()
	}
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatalf("objects after a -delete dir: %v, want %v", got, objs)
	}
	if fin, _ := r.store.FinishedSegments(r.tp); len(fin) != 2 {
		t.Fatalf("rows %v", fin)
	}
	if j := r.journal(); len(j) != 0 {
		t.Fatalf("journal %v", j)
	}
}

// A partition moved between two configured log dirs (JBOD, alter-log-dirs)
// continues under its new directory: its copies stay, it keeps tiering
// there, and nothing is journaled.
func TestMoveBetweenLogDirs(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	second := t.TempDir()
	r.c.cfg.LogDirs = append(r.c.cfg.LogDirs, second)
	objs := tieredTwo(t, r, idA)
	moved := filepath.Join(second, r.tp.String())
	// The broker fills "-future" in the target, then swaps: the source
	// becomes "-delete" and the target the live directory.
	if err := os.MkdirAll(moved+".0f1e2d3c4b5a69788796a5b4c3d2e1f0-future", 0o755); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if err := os.Rename(r.dir(), r.dir()+".2308294e39dc4a44ab8183f587805af2-delete"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved+".0f1e2d3c4b5a69788796a5b4c3d2e1f0-future", moved); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(r.dir()+".2308294e39dc4a44ab8183f587805af2-delete", "")
	for _, f := range []string{kafkalog.PartitionMetadataFile, kafkalog.FileName(0, ".log"), kafkalog.FileName(10, ".log"),
		kafkalog.FileName(20, ".log"), kafkalog.FileName(0, ".index"), kafkalog.FileName(0, ".timeindex"),
		kafkalog.FileName(10, ".index"), kafkalog.FileName(10, ".timeindex"), kafkalog.FileName(20, ".index"), kafkalog.FileName(20, ".timeindex")} {
		data, err := os.ReadFile(filepath.Join(old, f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(moved, f), string(data))
	}
	// The moved partition rolls on in its new log dir.
	os.Remove(filepath.Join(moved, kafkalog.FileName(20, ".log")))
	writeSegment(t, moved, 20, seq(20, 10), same(r.now.UnixMilli(), 10), 10)
	writeSegment(t, moved, 30, nil, nil, 0)
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d after the move, want 1 (segment 20)", n)
	}
	got := r.sortedObjects()
	for _, k := range objs {
		if i := sort.SearchStrings(got, k); i == len(got) || got[i] != k {
			t.Fatalf("object %s gone after the move", k)
		}
	}
	if fin, _ := r.store.FinishedSegments(r.tp); len(fin) != 3 || fin[2].StartOffset != 20 {
		t.Fatalf("rows after the move %+v", fin)
	}
	if j := r.journal(); len(j) != 0 {
		t.Fatalf("journal %v", j)
	}
}

// A partition live in two log dirs at once is held, not synced twice.
func TestDuplicatePartitionDirHeld(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	second := t.TempDir()
	r.c.cfg.LogDirs = append(r.c.cfg.LogDirs, second)
	tieredTwo(t, r, idA)
	topicID(t, filepath.Join(second, r.tp.String()), idA)
	if _, err := r.c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if held := heldOf(r.c); held[r.tp] != heldDuplicateDir {
		t.Fatalf("held %v", held)
	}
}

// A partition.metadata rewritten with a truncated id, emptied, or with a
// wrong version holds the partition with an error: no deletion, no
// copy; tiering resumes when the file is whole again.
func TestPartitionMetadataDamageHolds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	r := newRig(t, cfg, nil)
	objs := tieredTwo(t, r, idA)
	pm := filepath.Join(r.dir(), kafkalog.PartitionMetadataFile)
	os.Remove(filepath.Join(r.dir(), kafkalog.FileName(20, ".log")))
	writeSegment(t, r.dir(), 20, seq(20, 10), same(r.now.UnixMilli(), 10), 10)
	writeSegment(t, r.dir(), 30, nil, nil, 0)
	for _, bad := range []string{"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAA", "", "version: 1\ntopic_id: " + idA + "\n", "version: 0\ntopic_id: " + idB} {
		writeFile(t, pm, bad)
		_, err := r.c.Sync(context.Background())
		if !errors.Is(err, errHeld) {
			t.Fatalf("%q: sync = %v, want held", bad, err)
		}
		if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
			t.Fatalf("%q: objects changed: %v", bad, got)
		}
		if r.offsets().HighestTieredOffset != 19 {
			t.Fatalf("%q: copied while held: %+v", bad, r.offsets())
		}
	}
	if len(r.journal()) != 0 {
		t.Fatalf("journal %v", r.journal())
	}
	os.Remove(pm)
	if _, err := r.c.Sync(context.Background()); !errors.Is(err, errHeld) {
		t.Fatalf("a vanished partition.metadata: %v", err)
	}
	writeFile(t, pm, "version: 0\ntopic_id: "+idA+"\n")
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d after the file was whole again", n)
	}
	if held := heldOf(r.c); len(held) != 0 {
		t.Fatalf("still held: %v", held)
	}
}

// Without a cluster, a re-created topic (new topic id) is held with its
// old copies intact; the operator's 'topics delete --topic-id' schedules
// the old incarnation's deletion, the new one tiers at once, and the old
// copies go only after the grace period.
func TestRecreatedTopicWithoutCluster(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RemoteLogDeleteDelayMs = 3600_000
	r := newRig(t, cfg, nil)
	old := tieredTwo(t, r, idA)
	os.RemoveAll(r.dir())
	topicID(t, r.dir(), idB)
	writeSegment(t, r.dir(), 0, seq(0, 5), same(r.now.UnixMilli(), 5), 20)
	writeSegment(t, r.dir(), 5, nil, nil, 0)
	if _, err := r.c.Sync(context.Background()); !errors.Is(err, errHeld) {
		t.Fatalf("sync = %v, want held", err)
	}
	if got := r.sortedObjects(); !reflect.DeepEqual(got, old) || heldOf(r.c)[r.tp] != heldTopicIDChanged {
		t.Fatalf("objects %v held %v", got, heldOf(r.c))
	}
	ctx := context.Background()
	if _, err := r.c.DeleteTopic(ctx, "orders", idB, "tester"); !errors.Is(err, ErrNothingToDelete) {
		t.Fatalf("delete of the live incarnation: %v", err)
	}
	ds, err := r.c.DeleteTopic(ctx, "orders", idA, "tester")
	if err != nil || len(ds) != 1 || ds[0].Reason != remotelog.ReasonOperator || !strings.Contains(ds[0].Proof, "tester") {
		t.Fatalf("delete old incarnation: %+v %v", ds, err)
	}
	if n := r.sync(); n != 1 {
		t.Fatalf("new incarnation copied %d", n)
	}
	if fin, _ := r.store.FinishedSegments(r.tp); len(fin) != 1 || fin[0].TopicID != idB {
		t.Fatalf("rows %+v", fin)
	}
	if n := len(r.objects()); n != 15 {
		t.Fatalf("%d objects within the grace period, want 10 old + 5 new", n)
	}
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	for _, k := range r.objects() {
		for _, o := range old {
			if k == o {
				t.Fatalf("old object %s left after the grace period", k)
			}
		}
	}
	if n := len(r.objects()); n != 5 {
		t.Fatalf("%d objects after the deletion, want the new incarnation's 5", n)
	}
	if j := r.journal(); !reflect.DeepEqual(j, []string{"scheduled", "deleting", "deleted"}) {
		t.Fatalf("journal %v", j)
	}
}

// Without topic ids, a local log that restarts below what tierd recorded
// is held: nothing of it is deleted as if it were tiered.
func TestLogRestartedLowerHeld(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.LocalRetentionMs = ptr(0)
	r := newRig(t, cfg, nil)
	ts := r.now.Add(-time.Hour).UnixMilli()
	for b := int64(0); b < 200; b += 100 {
		writeSegment(t, r.dir(), b, seq(b, 100), same(ts, 100), 10)
	}
	writeSegment(t, r.dir(), 200, nil, nil, 0)
	r.sync()
	if off := r.offsets(); off.LocalLogStartOffset != 200 {
		t.Fatalf("first incarnation not deleted locally: %+v", off)
	}
	os.RemoveAll(r.dir())
	writeSegment(t, r.dir(), 0, seq(0, 120), same(ts, 120), 10)
	writeSegment(t, r.dir(), 120, nil, nil, 0)
	if _, err := r.c.Sync(context.Background()); !errors.Is(err, errHeld) || heldOf(r.c)[r.tp] != heldLogRestarted {
		t.Fatalf("sync = %v, held %v", err, heldOf(r.c))
	}
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{0, 120}) {
		t.Fatalf("fresh local data deleted: %v", got)
	}
	if n := len(r.objects()); n != 10 {
		t.Fatalf("%d objects", n)
	}
}

// An operator's topic deletion is refused while the topic's partition
// directory holds the same incarnation; once it is gone the copies are
// scheduled, stop being served, can be restored within the grace period,
// and are deleted after it.
func TestOperatorDeleteAndRestore(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RemoteLogDeleteDelayMs = 3600_000
	r := newRig(t, cfg, nil)
	objs := tieredTwo(t, r, idA)
	ctx := context.Background()
	if _, err := r.c.DeleteTopic(ctx, "orders", "", "tester"); !errors.Is(err, ErrTopicStillLocal) {
		t.Fatalf("delete with the live dir: %v", err)
	}
	os.RemoveAll(r.dir())
	if _, err := r.c.DeleteTopic(ctx, "orders", "", "tester"); err != nil {
		t.Fatal(err)
	}
	if fin, _ := r.store.FinishedSegments(r.tp); len(fin) != 0 {
		t.Fatalf("rows still served: %v", fin)
	}
	r.now = r.now.Add(30 * time.Minute)
	r.sync()
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("objects deleted within the grace period")
	}
	if _, err := r.c.RestorePartition(ctx, r.tp, "", "tester"); err != nil {
		t.Fatal(err)
	}
	if fin, _ := r.store.FinishedSegments(r.tp); len(fin) != 2 {
		t.Fatalf("rows after restore: %v", fin)
	}
	if _, err := r.c.RestorePartition(ctx, r.tp, "", "tester"); !errors.Is(err, ErrNothingScheduled) {
		t.Fatalf("second restore: %v", err)
	}
	if _, err := r.c.DeleteTopic(ctx, "orders", "", "tester"); err != nil {
		t.Fatal(err)
	}
	r.now = r.now.Add(61 * time.Minute)
	r.sync()
	if n := len(r.objects()); n != 0 {
		t.Fatalf("%d objects left after the grace period", n)
	}
	if _, err := r.c.RestorePartition(ctx, r.tp, "", "tester"); !errors.Is(err, ErrNothingScheduled) {
		t.Fatalf("restore after the deletion: %v", err)
	}
	if j := r.journal(); !reflect.DeepEqual(j, []string{"scheduled", "cancelled", "scheduled", "deleting", "deleted"}) {
		t.Fatalf("journal %v", j)
	}
}

// A finished copy whose objects vanished from the bucket (another tool
// deleted them) is found by the per-pass check, marked damaged, copied
// again from local disk, and no longer counts for local deletion; the
// damaged copy then goes as superseded.
func TestDamagedCopyRecopied(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	r := newRig(t, cfg, nil)
	tieredTwo(t, r, idA)
	fin, _ := r.store.FinishedSegments(r.tp)
	victim := fin[0]
	ctx := context.Background()
	if err := r.bucket.Delete(ctx, r.mgr.Key(victim, ".log")); err != nil {
		t.Fatal(err)
	}
	// Readers report it (DATA_LOSS); the next pass checks it.
	r.c.SuspectCopy(victim)
	r.sync()
	if got, _ := r.store.Segment(r.tp, 0, victim.ID); got.Damaged == "" {
		t.Fatalf("copy not marked damaged: %+v", got)
	}
	if got := testutilCounter(t, r.c.m.damaged); got != 1 {
		t.Fatalf("damaged copies %v", got)
	}
	// Local retention must not trust it: with local.retention.ms 0,
	// segment 0 stays until its new copy is finished.
	r.c.cfg.Retention.LocalRetentionMs = ptr(0)
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d, want segment 0 again", n)
	}
	fin, _ = r.store.FinishedSegments(r.tp)
	if len(fin) != 2 || fin[0].ID == victim.ID || fin[0].Damaged != "" {
		t.Fatalf("rows after the new copy %+v", fin)
	}
	r.sync()
	if got, _ := r.store.Segment(r.tp, 0, victim.ID); got.State != remotelog.DeleteSegmentFinished {
		t.Fatalf("damaged copy state %s, want deleted as superseded", got.State)
	}
	for _, k := range r.objects() {
		if strings.Contains(k, victim.ID.String()) {
			t.Fatalf("damaged copy's object %s left", k)
		}
	}
}

// The per-pass check finds a damaged copy without any reader.
func TestCopyCheckRotates(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	tieredTwo(t, r, idA)
	fin, _ := r.store.FinishedSegments(r.tp)
	if err := r.bucket.Delete(context.Background(), r.mgr.Key(fin[1], ".manifest.json")); err != nil {
		t.Fatal(err)
	}
	// Within copy_check_interval_ms of the round tieredTwo's passes made,
	// passes check nothing: the missing manifest stays unseen.
	checked := testutilCounter(t, r.c.m.copiesChecked)
	for i := 0; i < 3; i++ {
		r.now = r.now.Add(time.Minute)
		r.sync()
	}
	if got := testutilCounter(t, r.c.m.copiesChecked); got != checked {
		t.Fatalf("copies checked %v within the check interval, want %v", got, checked)
	}
	// Each interval past, one round: two rounds find it.
	for i := 0; i < 2; i++ {
		r.now = r.now.Add(5 * time.Minute)
		r.sync()
	}
	if got, _ := r.store.Segment(r.tp, fin[1].StartOffset, fin[1].ID); got.Damaged == "" && got.State == remotelog.CopySegmentFinished {
		t.Fatalf("two rounds of checks did not find the copy without its manifest: %+v", got)
	}
	if got := testutilCounter(t, r.c.m.copiesChecked); got < checked+2 {
		t.Fatalf("copies checked %v", got)
	}
}

// An operator's order given while the partition's directory was away (an
// unmounted disk) does not run when the directory is back at the due
// time: the incarnation is live again.
func TestOperatorDeleteWaitsForReturnedDir(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RemoteLogDeleteDelayMs = 3600_000
	r := newRig(t, cfg, nil)
	objs := tieredTwo(t, r, idA)
	away := r.dir() + ".unmounted"
	if err := os.Rename(r.dir(), away); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.DeleteTopic(context.Background(), "orders", "", "tester"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(away, r.dir()); err != nil {
		t.Fatal(err)
	}
	r.now = r.now.Add(2 * time.Hour)
	if _, err := r.c.Sync(context.Background()); !errors.Is(err, ErrTopicStillLocal) {
		t.Fatalf("sync = %v, want the due deletion to wait", err)
	}
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("a live incarnation's copies deleted")
	}
	if _, err := r.c.RestorePartition(context.Background(), r.tp, "", "tester"); err != nil {
		t.Fatal(err)
	}
	if n := r.sync(); n != 0 || len(heldOf(r.c)) != 0 {
		t.Fatalf("after the restore: copied %d, held %v", n, heldOf(r.c))
	}
}

// Without a cluster, an operator's order is refused while another tierd
// holds the partition's lease (its copies are in use).
func TestOperatorDeleteRefusedUnderOthersLease(t *testing.T) {
	shared := memory.New()
	mk := func(broker int32, instance string) *rig {
		cfg := DefaultConfig()
		cfg.BrokerOwned, cfg.BrokerID, cfg.InstanceID, cfg.OwnershipLease, cfg.CopyTimeout = yes(true), broker, instance, time.Minute, 20*time.Second
		cfg.RemoteLogDeleteDelayMs = 0
		return newRig(t, cfg, shared)
	}
	a, b := mk(1, "instance-a"), mk(2, "instance-b")
	tieredTwo(t, a, idA)
	a.c.releaseLeases(context.Background())
	os.RemoveAll(a.dir())
	topicID(t, b.dir(), idA)
	writeSegment(t, b.dir(), 0, seq(0, 10), same(b.now.UnixMilli(), 10), 10)
	writeSegment(t, b.dir(), 10, nil, nil, 0)
	b.sync() // b takes the released lease and the copies a made
	if l, ok, _ := b.mgr.ReadLease(context.Background(), b.tp); !ok || l.InstanceID != "instance-b" {
		t.Fatalf("lease %+v", l)
	}
	if _, err := a.c.DeleteTopic(context.Background(), "orders", "", "tester"); !errors.Is(err, ErrHeldElsewhere) {
		t.Fatalf("delete under another tierd's lease: %v", err)
	}
	if n := len(b.objects()); n < 10 {
		t.Fatalf("%d objects", n)
	}
}

// A copy damaged behind tierd's back since its last check is found right
// before the local segment would go: the local segment stays, is copied
// again, and goes only on the new copy.
func TestLocalDeleteChecksTheCopy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs, cfg.CopyChecksPerPass = 0, 0 // no sampled checks: only the one before the delete
	r := newRig(t, cfg, nil)
	tieredTwo(t, r, idA)
	fin, _ := r.store.FinishedSegments(r.tp)
	if err := r.bucket.Delete(context.Background(), r.mgr.Key(fin[0], ".log")); err != nil {
		t.Fatal(err)
	}
	r.c.cfg.Retention.LocalRetentionMs = ptr(0)
	r.now = r.now.Add(time.Minute)
	r.sync()
	if got := r.localBases(); len(got) == 0 || got[0] != 0 {
		t.Fatalf("local segment 0 deleted on a copy without its .log: local %v", got)
	}
	if got, _ := r.store.Segment(r.tp, 0, fin[0].ID); got.Damaged == "" {
		t.Fatalf("copy not marked damaged: %+v", got)
	}
	r.sync() // copied again, then deleted locally on the new copy
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{20}) {
		t.Fatalf("local %v, want only the active segment", got)
	}
	data, err := r.mgr.FetchLogSegment(context.Background(), mustFinished(t, r, 0), 0, -1)
	if err != nil {
		t.Fatalf("offset 0 not readable from the new copy: %v", err)
	}
	data.Close()
}

func mustFinished(t *testing.T, r *rig, start int64) remotelog.SegmentMetadata {
	t.Helper()
	fin, _ := r.store.FinishedSegments(r.tp)
	for _, f := range fin {
		if f.StartOffset == start && f.Damaged == "" {
			return f
		}
	}
	t.Fatalf("no undamaged copy at %d: %+v", start, fin)
	return remotelog.SegmentMetadata{}
}
