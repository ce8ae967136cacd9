package copier

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/remotelog"
)

func yes(b bool) *bool { return &b }

// rolled writes two rolled segments and an active one into a partition
// directory, timestamps at now.
func rolled(t *testing.T, dir string, now time.Time) {
	t.Helper()
	writeSegment(t, dir, 0, seq(0, 10), same(now.UnixMilli(), 10), 10)
	writeSegment(t, dir, 10, seq(10, 10), same(now.UnixMilli(), 10), 10)
	writeSegment(t, dir, 20, nil, nil, 0)
}

// TestTieringOptIn: with remote.storage.enable false by default, only the
// topics that turn it on are tiered; the others are left alone, their
// local segments untouched by local retention.
func TestTieringOptIn(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.RemoteStorageEnable = false
	cfg.Retention.LocalRetentionMs = ptr(0)
	cfg.Topics = map[string]topics.TopicConfig{"orders": {RemoteStorageEnable: yes(true)}}
	r := newRig(t, cfg, nil)
	rolled(t, r.dir(), r.now)
	audit := filepath.Join(r.logDir, "audit-0")
	rolled(t, audit, r.now)
	r.now = r.now.Add(time.Minute) // both topics' segments past local.retention.ms 0
	if n := r.sync(); n != 2 {
		t.Fatalf("copied %d segments, want orders' 2 only", n)
	}
	for _, k := range r.objects() {
		if strings.Contains(k, "audit") {
			t.Fatalf("audit (not opted in) was copied: %s", k)
		}
	}
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{20}) {
		t.Fatalf("orders local segments %v; want local retention to leave the active one", got)
	}
	ents, _ := os.ReadDir(audit)
	if len(ents) != 9 {
		t.Fatalf("audit dir holds %d files, want its 9 untouched", len(ents))
	}
	// Opt-out is the default: every topic but the one turning it off.
	cfg = DefaultConfig()
	cfg.Topics = map[string]topics.TopicConfig{"orders": {RemoteStorageEnable: yes(false)}}
	r2 := newRig(t, cfg, nil)
	rolled(t, r2.dir(), r2.now)
	rolled(t, filepath.Join(r2.logDir, "audit-0"), r2.now)
	if n := r2.sync(); n != 2 {
		t.Fatalf("opt-out: copied %d, want audit's 2", n)
	}
	if st := r2.states(); len(st) != 0 {
		t.Fatalf("orders (opted out) has rows %v", st)
	}
}

// TestCopyDisable follows KIP-950's remote.log.copy.disable: copying
// stops, the copies stay readable, remote retention goes on, and local
// data follows retention.ms rather than local.retention.ms.
func TestCopyDisable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	r := newRig(t, cfg, nil)
	rolled(t, r.dir(), r.now)
	r.sync()
	next := r.c.cfg
	next.Retention.LocalRetentionMs = ptr(0)
	next.Topics = map[string]topics.TopicConfig{"orders": {RemoteLogCopyDisable: yes(true)}}
	if err := r.c.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	writeSegment(t, r.dir(), 20, seq(20, 10), same(r.now.UnixMilli(), 10), 10)
	writeSegment(t, r.dir(), 30, nil, nil, 0)
	r.now = r.now.Add(time.Minute) // past local.retention.ms 0, within retention.ms
	if n := r.sync(); n != 0 {
		t.Fatalf("copied %d with remote.log.copy.disable", n)
	}
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{0, 10, 20, 30}) {
		t.Fatalf("local segments %v: local.retention.ms 0 applied although copying is off (retention.ms rules)", got)
	}
	if st := r.states(); st[remotelog.CopySegmentFinished] != 2 {
		t.Fatalf("the copies did not stay: %v", st)
	}
	r.now = r.now.Add(8 * 24 * time.Hour) // past retention.ms (7 days)
	r.sync()
	if st := r.states(); st[remotelog.CopySegmentFinished] != 0 {
		t.Fatalf("remote retention stopped with copying: %v", st)
	}
}

// TestDisableKeepsCopies: remote.storage.enable false alone leaves the
// topic alone: no copy, no retention, its copies kept (and readable).
func TestDisableKeepsCopies(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	objs := tieredTwo(t, r, "")
	next := r.c.cfg
	next.Topics = map[string]topics.TopicConfig{"orders": {RemoteStorageEnable: yes(false)}}
	if err := r.c.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	r.now = r.now.Add(30 * 24 * time.Hour) // far past retention.ms
	r.sync()
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatalf("objects changed with tiering off and no delete: %v", got)
	}
	if ds, _ := r.store.Deletions(nil); len(ds) != 0 {
		t.Fatalf("deletions %+v", ds)
	}
}

// TestDeleteOnDisable: remote.storage.enable false with
// remote.log.delete.on.disable true schedules the deletion of the topic's
// copies, journaled with the configuration as its proof; turning tiering
// back on within the grace period cancels it; once due, the copies go.
func TestDeleteOnDisable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RemoteLogDeleteDelayMs, cfg.Source = 3600_000, "/etc/tierd.yaml"
	r := newRig(t, cfg, nil)
	objs := tieredTwo(t, r, idA)
	off := func() Config {
		next := r.c.cfg
		next.Topics = map[string]topics.TopicConfig{"orders": {RemoteStorageEnable: yes(false), RemoteLogDeleteOnDisable: yes(true)}}
		return next
	}
	if err := r.c.Reconfigure(off()); err != nil {
		t.Fatal(err)
	}
	r.sync()
	ds, _ := r.store.Deletions(nil)
	if len(ds) != 1 || ds[0].Reason != remotelog.ReasonTieringDisabled || ds[0].TopicID != idA ||
		!strings.Contains(ds[0].Proof, "remote.storage.enable=false (copier.topics.orders)") ||
		!strings.Contains(ds[0].Proof, "remote.log.delete.on.disable=true (copier.topics.orders)") || !strings.Contains(ds[0].Proof, "/etc/tierd.yaml") {
		t.Fatalf("deletions %+v", ds)
	}
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("objects deleted before the grace period")
	}
	// Back on within the grace period: cancelled, the copies live again.
	on := r.c.cfg
	on.Topics = nil
	if err := r.c.Reconfigure(on); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if ds, _ := r.store.Deletions(nil); len(ds) != 0 {
		t.Fatalf("deletion not cancelled by tiering on again: %+v", ds)
	}
	if st := r.states(); st[remotelog.CopySegmentFinished] != 2 {
		t.Fatalf("copies not live again: %v", st)
	}
	// Off again, and due: deleted.
	if err := r.c.Reconfigure(off()); err != nil {
		t.Fatal(err)
	}
	r.sync()
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	if n := len(r.objects()); n != 0 {
		t.Fatalf("%d objects after the grace period", n)
	}
	if j := r.journal(); !reflect.DeepEqual(j, []string{"scheduled", "cancelled", "scheduled", "deleting", "deleted"}) {
		t.Fatalf("journal %v", j)
	}
	// Nothing left to delete, nothing scheduled again.
	r.sync()
	if ds, _ := r.store.Deletions(nil); len(ds) != 0 {
		t.Fatalf("deletions after the end: %+v", ds)
	}
}

// TestDeleteOnDisableRestored: copies an operator restored from a
// tiering-disabled deletion are not scheduled again on the configuration
// alone.
func TestDeleteOnDisableRestored(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RemoteLogDeleteDelayMs = 3600_000
	r := newRig(t, cfg, nil)
	objs := tieredTwo(t, r, idA)
	r.c.cfg.Topics = map[string]topics.TopicConfig{"orders": {RemoteStorageEnable: yes(false), RemoteLogDeleteOnDisable: yes(true)}}
	r.sync()
	if _, err := r.c.RestorePartition(context.Background(), r.tp, "", "ops@test"); err != nil {
		t.Fatal(err)
	}
	r.sync()
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	if ds, _ := r.store.Deletions(nil); len(ds) != 0 {
		t.Fatalf("scheduled again after a restore: %+v", ds)
	}
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("restored copies deleted")
	}
}

// TestDeleteOnDisableRecheck: a due deletion whose configuration no longer
// orders it is cancelled, not run. The policy is changed behind the
// copier's back (the partition directory gone, so no pass re-enables it).
func TestDeleteOnDisableRecheck(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RemoteLogDeleteDelayMs = 3600_000
	cfg.Topics = map[string]topics.TopicConfig{"orders": {RemoteStorageEnable: yes(false), RemoteLogDeleteOnDisable: yes(true)}}
	r := newRig(t, cfg, nil)
	r.c.cfg.Topics = nil
	objs := tieredTwo(t, r, idA)
	r.c.cfg.Topics = cfg.Topics
	r.sync()
	if ds, _ := r.store.Deletions(nil); len(ds) != 1 {
		t.Fatalf("deletions %+v", ds)
	}
	os.RemoveAll(r.dir())
	r.c.cfg.Topics = map[string]topics.TopicConfig{"orders": {RemoteStorageEnable: yes(false)}} // delete.on.disable dropped
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("a deletion the policy no longer orders ran")
	}
	if j := r.journal(); !reflect.DeepEqual(j, []string{"scheduled", "cancelled"}) {
		t.Fatalf("journal %v", j)
	}
}

// TestClusterDeleteOnDisable: the cluster's topic configs order it too;
// the proof names their source.
func TestClusterDeleteOnDisable(t *testing.T) {
	fc := newFakeCluster()
	fc.set("orders", idA, 1, 0, nil)
	r := clusterRig(t, fc)
	tieredTwo(t, r, idA)
	fc.set("orders", idA, 1, 0, map[string]cluster.ConfigValue{
		"remote.storage.enable":        {Value: "false", Source: "DYNAMIC_TOPIC_CONFIG"},
		"remote.log.delete.on.disable": {Value: "true", Source: "DYNAMIC_TOPIC_CONFIG"},
	})
	r.sync()
	ds, _ := r.store.Deletions(nil)
	if len(ds) != 1 || ds[0].Reason != remotelog.ReasonTieringDisabled ||
		!strings.Contains(ds[0].Proof, "remote.storage.enable=false (cluster DYNAMIC_TOPIC_CONFIG)") {
		t.Fatalf("deletions %+v", ds)
	}
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	if n := len(r.objects()); n != 0 {
		t.Fatalf("%d objects after the grace period", n)
	}
	if _, err := r.c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestClusterOverrideLogged: a pass logs once each value the cluster's
// topic configs set over tierd.yaml's, and none for a cluster value equal
// to tierd.yaml's or one from Kafka's built-in defaults.
func TestClusterOverrideLogged(t *testing.T) {
	fc := newFakeCluster()
	fc.set("orders", idA, 1, 0, map[string]cluster.ConfigValue{
		"retention.ms":          {Value: "3600000", Source: "DYNAMIC_TOPIC_CONFIG"},
		"retention.bytes":       {Value: "-1", Source: "DYNAMIC_TOPIC_CONFIG"}, // tierd.yaml's own
		"remote.storage.enable": {Value: "false", Source: "DEFAULT_CONFIG", IsDefault: true},
	})
	r := clusterRig(t, fc)
	logs := &logRecorder{}
	var err error
	if r.c, err = New(r.c.cfg, r.store, r.mgr, WithClock(func() time.Time { return r.now }), WithCluster(fc), WithLogger(slog.New(logs))); err != nil {
		t.Fatal(err)
	}
	rolled(t, r.dir(), r.now)
	r.sync()
	r.sync()
	got := logs.with("topic config from the cluster overrides tierd.yaml")
	if len(got) != 1 || got[0].attrs["config"] != "retention.ms" || got[0].attrs["value"] != "3600000" || got[0].attrs["source"] != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("override logs %+v, want retention.ms's once", got)
	}
	if l := r.c.settings("orders").Limits; l.RetentionMs != 3600_000 {
		t.Fatalf("limits %+v", l)
	}
}
