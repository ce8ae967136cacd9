package copier

import (
	"context"
	"errors"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/remotelog"
)

// fakeCluster is an in-memory cluster for fast unit tests of the copier's
// decisions; the kfake tests in e2e run the same paths over a real
// protocol client.
type fakeCluster struct {
	mu     sync.Mutex
	id     string
	topics map[string]cluster.Topic
	down   bool
	asked  [][]string // TopicIDs calls
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{id: "cluster-1", topics: map[string]cluster.Topic{}}
}

func (f *fakeCluster) set(name, id string, leader, epoch int32, configs map[string]cluster.ConfigValue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topics[name] = cluster.Topic{Name: name, ID: id, Configs: configs,
		Partitions: map[int32]cluster.Partition{0: {Leader: leader, LeaderEpoch: epoch}}}
}

func (f *fakeCluster) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.topics, name)
}

func (f *fakeCluster) Describe(_ context.Context, _ []string) (*cluster.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errors.New("dial tcp 127.0.0.1:9092: connection refused")
	}
	v := &cluster.View{ClusterID: f.id, Topics: map[string]cluster.Topic{}, ByID: map[string]string{}, Source: "fake", At: time.Now()}
	for n, t := range f.topics {
		v.Topics[n] = t
		v.ByID[t.ID] = n
	}
	return v, nil
}

func (f *fakeCluster) TopicIDs(_ context.Context, ids []string) (string, map[string]cluster.IDStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, ids)
	if f.down {
		return "", nil, errors.New("connection refused")
	}
	res := map[string]cluster.IDStatus{}
	for _, id := range ids {
		res[id] = cluster.IDStatus{State: cluster.IDGone, Proof: "fake: UNKNOWN_TOPIC_ID for " + id}
		for n, t := range f.topics {
			if t.ID == id {
				res[id] = cluster.IDStatus{State: cluster.IDExists, Name: n, Proof: "fake: exists"}
			}
		}
	}
	return f.id, res, nil
}

func clusterRig(t *testing.T, fc *fakeCluster) *rig {
	cfg := DefaultConfig()
	cfg.BrokerOwned, cfg.BrokerID, cfg.RemoteLogDeleteDelayMs = yes(true), 1, 3600_000
	r := newRig(t, cfg, nil)
	var err error
	if r.c, err = New(r.c.cfg, r.store, r.mgr, WithClock(func() time.Time { return r.now }), WithCluster(fc)); err != nil {
		t.Fatal(err)
	}
	return r
}

// With a cluster, a deleted topic's copies are scheduled when the cluster
// answers UNKNOWN_TOPIC_ID for its id, and deleted after the grace period
// on a fresh confirmation; a cluster that cannot be asked delays it.
func TestClusterTopicDeleted(t *testing.T) {
	fc := newFakeCluster()
	fc.set("orders", idA, 1, 5, nil)
	r := clusterRig(t, fc)
	objs := tieredTwo(t, r, idA)
	fc.remove("orders")
	os.RemoveAll(r.dir())
	r.sync()
	ds, _ := r.store.Deletions(nil)
	if len(ds) != 1 || ds[0].Reason != remotelog.ReasonTopicDeleted || ds[0].Proof != "fake: UNKNOWN_TOPIC_ID for "+idA {
		t.Fatalf("deletions %+v", ds)
	}
	r.now = r.now.Add(2 * time.Hour)
	fc.down = true
	if _, err := r.c.Sync(context.Background()); err == nil {
		t.Fatal("a due deletion ran with the cluster down")
	}
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("objects deleted with the cluster down")
	}
	if ok, why := r.c.ClusterStatus(); ok || why == "" {
		t.Fatalf("cluster status %v %q", ok, why)
	}
	fc.down = false
	r.sync()
	if n := len(r.objects()); n != 0 {
		t.Fatalf("%d objects after the grace period", n)
	}
	if j := r.journal(); !reflect.DeepEqual(j, []string{"scheduled", "deleting", "deleted"}) {
		t.Fatalf("journal %v", j)
	}
}

// Only the leader's tierd copies; a view of another cluster is refused
// and stops everything.
func TestClusterLeadershipAndClusterID(t *testing.T) {
	fc := newFakeCluster()
	fc.set("orders", idA, 2, 5, nil) // broker 2 leads
	r := clusterRig(t, fc)
	topicID(t, r.dir(), idA)
	ts := r.now.UnixMilli()
	writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 10)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	if n := r.sync(); n != 0 {
		t.Fatalf("a follower's tierd copied %d", n)
	}
	fc.set("orders", idA, 1, 6, nil) // moved to broker 1
	if n := r.sync(); n != 1 {
		t.Fatalf("the new leader's tierd copied %d", n)
	}
	fc.id = "another-cluster"
	fc.remove("orders")
	r.now = r.now.Add(48 * time.Hour)
	r.sync()
	if ds, _ := r.store.Deletions(nil); len(ds) != 0 {
		t.Fatalf("another cluster's answer scheduled %+v", ds)
	}
	if ok, why := r.c.ClusterStatus(); ok || why == "" {
		t.Fatalf("cluster status %v %q", ok, why)
	}
}

// A topic re-created under the same name: the old id's copies are
// scheduled only once the cluster confirms the old id gone; meanwhile the
// partition is held.
func TestClusterRecreatedTopic(t *testing.T) {
	fc := newFakeCluster()
	fc.set("orders", idA, 1, 0, nil)
	r := clusterRig(t, fc)
	tieredTwo(t, r, idA)
	os.RemoveAll(r.dir())
	topicID(t, r.dir(), idB)
	writeSegment(t, r.dir(), 0, seq(0, 5), same(r.now.UnixMilli(), 5), 20)
	writeSegment(t, r.dir(), 5, nil, nil, 0)
	// The cluster still has the old id: the new directory is held.
	if _, err := r.c.Sync(context.Background()); !errors.Is(err, errHeld) {
		t.Fatalf("sync = %v", err)
	}
	if ds, _ := r.store.Deletions(nil); len(ds) != 0 {
		t.Fatalf("scheduled while the old id exists: %+v", ds)
	}
	fc.set("orders", idB, 1, 0, nil)
	if n := r.sync(); n != 1 {
		t.Fatalf("new incarnation copied %d", n)
	}
	ds, _ := r.store.Deletions(nil)
	if len(ds) != 1 || ds[0].TopicID != idA {
		t.Fatalf("deletions %+v", ds)
	}
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	if n := len(r.objects()); n != 5 {
		t.Fatalf("%d objects, want the new incarnation's 5", n)
	}
}

// Topic configs set in the cluster override tierd.yaml's; Kafka's
// built-in defaults do not; remote.storage.enable=false stops tiering.
func TestClusterTopicConfigs(t *testing.T) {
	fc := newFakeCluster()
	fc.set("orders", idA, 1, 0, map[string]cluster.ConfigValue{
		"retention.ms": {Value: "604800000", Source: "DEFAULT_CONFIG", IsDefault: true},
	})
	r := clusterRig(t, fc)
	r.c.cfg.Retention.RetentionMs = ptr(3600_000)
	tieredTwo(t, r, idA)
	r.sync()
	if l := r.c.settings("orders").Limits; l.RetentionMs != 3600_000 {
		t.Fatalf("Kafka's default overrode tierd.yaml: %+v", l)
	}
	fc.set("orders", idA, 1, 0, map[string]cluster.ConfigValue{
		"retention.ms": {Value: "60000", Source: "DYNAMIC_TOPIC_CONFIG"},
	})
	r.now = r.now.Add(10 * time.Minute)
	r.sync()
	if off := r.offsets(); off.LogStartOffset != 20 {
		t.Fatalf("retention.ms from the cluster not applied: %+v", off)
	}
	fc.set("orders", idA, 1, 0, map[string]cluster.ConfigValue{
		"remote.storage.enable": {Value: "false", Source: "DYNAMIC_TOPIC_CONFIG"},
	})
	writeSegment(t, r.dir(), 20, seq(20, 5), same(r.now.UnixMilli(), 5), 10)
	writeSegment(t, r.dir(), 25, nil, nil, 0)
	if n := r.sync(); n != 0 {
		t.Fatalf("copied %d with remote.storage.enable=false", n)
	}
}

// A pass that cannot read a topic's configs keeps the last ones read; with
// none read yet it applies no retention, never tierd.yaml's shorter one.
func TestClusterConfigsUnreadable(t *testing.T) {
	fc := newFakeCluster()
	month := map[string]cluster.ConfigValue{"retention.ms": {Value: "2592000000", Source: "DYNAMIC_TOPIC_CONFIG"}}
	fc.set("orders", idA, 1, 0, month)
	r := clusterRig(t, fc)
	tieredTwo(t, r, idA) // read once: 30 days
	unreadable := func() {
		fc.mu.Lock()
		tp := fc.topics["orders"]
		tp.Configs, tp.ConfigErr = nil, errors.New("TOPIC_AUTHORIZATION_FAILED")
		fc.topics["orders"] = tp
		fc.mu.Unlock()
	}
	unreadable()
	r.now = r.now.Add(10 * 24 * time.Hour) // past tierd.yaml's 7 days, within the cluster's 30
	r.sync()
	if off := r.offsets(); off.LogStartOffset != 0 {
		t.Fatalf("tierd.yaml's retention applied while the configs were unreadable: %+v", off)
	}
	fresh := clusterRig(t, fc) // never read the configs
	tieredTwo(t, fresh, idA)
	fresh.now = fresh.now.Add(10 * 24 * time.Hour)
	fresh.sync()
	if off := fresh.offsets(); off.LogStartOffset != 0 {
		t.Fatalf("retention applied with no configs ever read: %+v", off)
	}
}
