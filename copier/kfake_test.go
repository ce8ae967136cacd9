package copier

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// These tests run the copier against franz-go's kfake, an in-process Kafka
// cluster on loopback sockets, through tierd's real cluster client (kadm
// and kmsg requests): topic deletion and re-creation, leadership moves and
// topic configs as a cluster really answers them.

type kafkaRig struct {
	kc  *kfake.Cluster
	adm *kadm.Client
	cl  *cluster.Client
}

func newKafkaRig(t *testing.T) *kafkaRig {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID("tierd-copier-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	cfg := cluster.DefaultConfig()
	cfg.BootstrapServers, cfg.RequestTimeout = kc.ListenAddrs(), 5*time.Second
	cl, err := cluster.New(cfg, cluster.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &kafkaRig{kc: kc, adm: adm, cl: cl}
}

// create makes topic orders with one partition led by broker leader and
// returns its topic id as partition.metadata spells it.
func (k *kafkaRig) create(t *testing.T, leader int32) string {
	t.Helper()
	r, err := k.adm.CreateTopic(context.Background(), 1, 3, nil, "orders")
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := k.kc.MoveTopicPartition("orders", 0, leader); err != nil {
		t.Fatal(err)
	}
	return cluster.FormatTopicID(r.ID)
}

func (k *kafkaRig) delete(t *testing.T) {
	t.Helper()
	r, err := k.adm.DeleteTopic(context.Background(), "orders")
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatal(err)
	}
}

// tierdFor is broker's tierd over bucket b (a fresh one when nil).
func (k *kafkaRig) tierdFor(t *testing.T, broker int32, b rsm.Bucket) *rig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BrokerOwned, cfg.BrokerID, cfg.RemoteLogDeleteDelayMs = yes(true), broker, 3600_000
	r := newRig(t, cfg, b)
	var err error
	if r.c, err = New(r.c.cfg, r.store, r.mgr, WithClock(func() time.Time { return r.now }), WithCluster(k.cl)); err != nil {
		t.Fatal(err)
	}
	return r
}

// replicas returns brokers 1 and 2's tierds over bucket b, each with the
// same log of topic id: rolled segments 0, 10 and 20, active 30.
func (k *kafkaRig) replicas(t *testing.T, id string, b rsm.Bucket) (one, two *rig) {
	t.Helper()
	one, two = k.tierdFor(t, 1, b), k.tierdFor(t, 2, b)
	ts := one.now.UnixMilli()
	for _, r := range []*rig{one, two} {
		topicID(t, r.dir(), id)
		for base := int64(0); base < 30; base += 10 {
			writeSegment(t, r.dir(), base, seq(base, 10), same(ts, 10), 10)
		}
		writeSegment(t, r.dir(), 30, nil, nil, 0)
	}
	return one, two
}

// A topic deleted in the cluster: its copies are scheduled (with the
// cluster's UNKNOWN_TOPIC_ID answer as proof), kept through the grace
// period, and deleted after it.
func TestKafkaTopicDeleted(t *testing.T) {
	k := newKafkaRig(t)
	id := k.create(t, 1)
	r := k.tierdFor(t, 1, nil)
	objs := tieredTwo(t, r, id)
	k.delete(t)
	r.sync()
	ds, _ := r.store.Deletions(nil)
	if len(ds) != 1 || ds[0].Reason != remotelog.ReasonTopicDeleted || !strings.Contains(ds[0].Proof, "UNKNOWN_TOPIC_ID") {
		t.Fatalf("deletions %+v", ds)
	}
	r.now = r.now.Add(59 * time.Minute)
	r.sync()
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("objects deleted within the grace period")
	}
	r.now = r.now.Add(2 * time.Minute)
	r.sync()
	if n := len(r.objects()); n != 0 {
		t.Fatalf("%d objects after the grace period", n)
	}
	if j := r.journal(); !reflect.DeepEqual(j, []string{"scheduled", "deleting", "deleted"}) {
		t.Fatalf("journal %v", j)
	}
}

// A topic deleted and re-created under the same name: the old id's copies
// are scheduled once the cluster says that id is gone, and the new
// incarnation tiers at once.
func TestKafkaTopicRecreated(t *testing.T) {
	k := newKafkaRig(t)
	oldID := k.create(t, 1)
	r := k.tierdFor(t, 1, nil)
	old := tieredTwo(t, r, oldID)
	k.delete(t)
	newID := k.create(t, 1)
	if newID == oldID {
		t.Fatal("kfake re-created the topic with the same id")
	}
	os.RemoveAll(r.dir())
	topicID(t, r.dir(), newID)
	writeSegment(t, r.dir(), 0, seq(0, 5), same(r.now.UnixMilli(), 5), 20)
	writeSegment(t, r.dir(), 5, nil, nil, 0)
	if n := r.sync(); n != 1 {
		t.Fatalf("new incarnation copied %d", n)
	}
	ds, _ := r.store.Deletions(nil)
	if len(ds) != 1 || ds[0].TopicID != oldID || len(ds[0].Segments) != 2 {
		t.Fatalf("deletions %+v", ds)
	}
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	for _, k := range r.objects() {
		for _, o := range old {
			if k == o {
				t.Fatalf("old incarnation's %s left", k)
			}
		}
	}
	if fin, _ := r.store.FinishedSegments(r.tp); len(fin) != 1 || fin[0].TopicID != newID {
		t.Fatalf("rows %+v", fin)
	}
}

// blockingBucket holds the upload of the leader-epoch object (the last
// small object before the manifest) of keys containing the held prefix
// (setHold) until release is closed, so that a copy can be caught in
// flight. The prefix is read under a lock: a copy's .log goes up beside
// its small objects, while the test changes it.
type blockingBucket struct {
	rsm.Bucket
	mu      sync.Mutex
	hold    string
	after   bool // hold after the manifest is stored instead
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingBucket) setHold(prefix string) {
	b.mu.Lock()
	b.hold = prefix
	b.mu.Unlock()
}

func (b *blockingBucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	b.mu.Lock()
	hold := b.hold
	b.mu.Unlock()
	if b.after && hold != "" && strings.Contains(key, hold) && strings.HasSuffix(key, ".manifest.json") {
		err := b.Bucket.Upload(ctx, key, r, size)
		b.once.Do(func() { close(b.reached) })
		<-b.release
		return err
	}
	if !b.after && hold != "" && strings.Contains(key, hold) && strings.HasSuffix(key, remotelog.LeaderEpochIndex.Suffix()) {
		b.once.Do(func() { close(b.reached) })
		<-b.release
	}
	return b.Bucket.Upload(ctx, key, r, size)
}

// Leadership moves from broker 1 to broker 2 while broker 1's tierd is in
// the middle of a copy: broker 2's tierd raises the fence, takes in broker
// 1's copies and continues from the highest tiered offset; broker 1's
// copy is not committed, and broker 1's tierd copies nothing more.
func TestKafkaLeadershipMove(t *testing.T) {
	k := newKafkaRig(t)
	id := k.create(t, 1)
	shared := &blockingBucket{Bucket: memory.New(), reached: make(chan struct{}), release: make(chan struct{})}
	one, two := k.replicas(t, id, shared)
	ts := one.now.UnixMilli()
	if n := two.sync(); n != 0 {
		t.Fatalf("broker 2's tierd copied %d while broker 1 leads", n)
	}
	// Broker 1's tierd copies 0 and 10, and hangs in the copy of 20
	// just before its manifest.
	shared.setHold("00000000000000000020-")
	done := make(chan error, 1)
	go func() { _, err := one.c.Sync(context.Background()); done <- err }()
	<-shared.reached
	if err := k.kc.MoveTopicPartition("orders", 0, 2); err != nil {
		t.Fatal(err)
	}
	shared.setHold("")
	go func() {
		time.Sleep(50 * time.Millisecond)
		close(shared.release)
	}()
	if n := two.sync(); n != 1 {
		t.Fatalf("broker 2's tierd copied %d, want only segment 20 after taking in 0 and 10", n)
	}
	if err := <-done; !errors.Is(err, rsm.ErrFenced) {
		t.Fatalf("broker 1's pass = %v, want its in-flight copy fenced", err)
	}
	if got := testutilCounter(t, one.c.m.fenced); got != 1 {
		t.Fatalf("fenced copies %v", got)
	}
	mfs, err := two.mgr.Manifests(context.Background(), two.tp)
	if err != nil {
		t.Fatal(err)
	}
	byBase := map[int64][]int32{}
	for _, mf := range mfs {
		if mf.CopyLeaderEpoch == nil {
			t.Fatalf("manifest without a leader epoch: %+v", mf)
		}
		byBase[mf.StartOffset] = append(byBase[mf.StartOffset], mf.BrokerID)
	}
	if !reflect.DeepEqual(byBase, map[int64][]int32{0: {1}, 10: {1}, 20: {2}}) {
		t.Fatalf("committed copies by base offset and broker: %v", byBase)
	}
	if off := two.offsets(); off.HighestTieredOffset != 29 {
		t.Fatalf("broker 2's offsets %+v", off)
	}
	writeSegment(t, one.dir(), 30, seq(30, 10), same(ts, 10), 10)
	writeSegment(t, one.dir(), 40, nil, nil, 0)
	if n := one.sync(); n != 0 {
		t.Fatalf("broker 1's tierd copied %d after losing leadership", n)
	}
}

// A topic config altered through kadm applies on the next pass.
func TestKafkaConfigAltered(t *testing.T) {
	k := newKafkaRig(t)
	id := k.create(t, 1)
	r := k.tierdFor(t, 1, nil)
	tieredTwo(t, r, id)
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	if off := r.offsets(); off.LogStartOffset != 0 {
		t.Fatalf("deleted under tierd.yaml's 7-day retention: %+v", off)
	}
	v := "3600000"
	res, err := k.adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res {
		if x.Err != nil {
			t.Fatal(x.Err)
		}
	}
	r.sync()
	if off := r.offsets(); off.LogStartOffset != 20 {
		t.Fatalf("retention.ms=3600000 from the cluster not applied: %+v", off)
	}
}

// An operator's deletion order is refused while the cluster says the
// topic exists, even with its partition directory gone from this broker
// (a reassignment away).
func TestKafkaOperatorDeleteRefused(t *testing.T) {
	k := newKafkaRig(t)
	id := k.create(t, 1)
	r := k.tierdFor(t, 1, nil)
	objs := tieredTwo(t, r, id)
	os.RemoveAll(r.dir())
	if _, err := r.c.DeleteTopic(context.Background(), "orders", "", "tester"); !errors.Is(err, ErrTopicStillExists) {
		t.Fatalf("delete of a live topic: %v", err)
	}
	r.now = r.now.Add(48 * time.Hour)
	r.sync()
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("objects of a live topic deleted")
	}
	if j := r.journal(); len(j) != 0 {
		t.Fatalf("journal %v", j)
	}
}

// The old leader's copy is fenced after its manifest was written, and
// the new leader has already taken it in: the old leader leaves its
// objects alone, so the new leader's row stays whole.
func TestKafkaFencedAfterManifest(t *testing.T) {
	k := newKafkaRig(t)
	id := k.create(t, 1)
	shared := &blockingBucket{Bucket: memory.New(), after: true, reached: make(chan struct{}), release: make(chan struct{})}
	one, two := k.replicas(t, id, shared)
	shared.setHold("00000000000000000020-")
	done := make(chan error, 1)
	go func() { _, err := one.c.Sync(context.Background()); done <- err }()
	<-shared.reached
	if err := k.kc.MoveTopicPartition("orders", 0, 2); err != nil {
		t.Fatal(err)
	}
	shared.setHold("")
	if n := two.sync(); n != 0 {
		t.Fatalf("broker 2's tierd copied %d, want none: broker 1's three copies are whole", n)
	}
	close(shared.release)
	if err := <-done; !errors.Is(err, errFencedAfterManifest) {
		t.Fatalf("broker 1's pass = %v, want its copy fenced after the manifest", err)
	}
	fin, _ := two.store.FinishedSegments(two.tp)
	if len(fin) != 3 {
		t.Fatalf("broker 2's rows %+v", fin)
	}
	for _, r := range fin {
		if missing, err := two.mgr.MissingObjects(context.Background(), r); err != nil || len(missing) != 0 {
			t.Fatalf("copy %d: missing %v, %v", r.StartOffset, missing, err)
		}
	}
	if rows, _ := one.store.Segments(one.tp); len(rows) != 2 {
		t.Fatalf("broker 1 kept %d rows, want its 2 committed ones (the fenced one forgotten)", len(rows))
	}
}

// An operator's restore holds: the cluster still says the topic id is
// gone, and the copies are not scheduled again until an operator orders
// it.
func TestKafkaRestoreHolds(t *testing.T) {
	k := newKafkaRig(t)
	id := k.create(t, 1)
	r := k.tierdFor(t, 1, nil)
	objs := tieredTwo(t, r, id)
	k.delete(t)
	os.RemoveAll(r.dir())
	r.sync()
	if _, err := r.c.RestorePartition(context.Background(), r.tp, "", "tester"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		r.now = r.now.Add(2 * time.Hour)
		r.sync()
	}
	if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
		t.Fatal("restored copies deleted")
	}
	if j := r.journal(); !reflect.DeepEqual(j, []string{"scheduled", "cancelled"}) {
		t.Fatalf("journal %v", j)
	}
	if _, err := r.c.DeleteTopic(context.Background(), "orders", "", "tester"); err != nil {
		t.Fatal(err)
	}
	r.now = r.now.Add(2 * time.Hour)
	r.sync()
	if n := len(r.objects()); n != 0 {
		t.Fatalf("%d objects after the operator's order and the grace period", n)
	}
}

// A topic re-created while the old incarnation's fence is at a higher
// leader epoch: the new incarnation's epochs start over and it is tiered.
func TestKafkaRecreatedLowerEpoch(t *testing.T) {
	k := newKafkaRig(t)
	oldID := k.create(t, 1)
	for _, n := range []int32{2, 1, 2, 1} { // epoch up by four
		if err := k.kc.MoveTopicPartition("orders", 0, n); err != nil {
			t.Fatal(err)
		}
	}
	r := k.tierdFor(t, 1, nil)
	tieredTwo(t, r, oldID)
	k.delete(t)
	newID := k.create(t, 1)
	os.RemoveAll(r.dir())
	topicID(t, r.dir(), newID)
	writeSegment(t, r.dir(), 0, seq(0, 5), same(r.now.UnixMilli(), 5), 20)
	writeSegment(t, r.dir(), 5, nil, nil, 0)
	if n := r.sync(); n != 1 {
		t.Fatalf("the re-created topic copied %d, held %v", n, heldOf(r.c))
	}
}
