package copier

import (
	"strings"
	"testing"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/remotelog"
)

// TestStatusByCluster: with a Kafka cluster, the status says the partition
// is led elsewhere (naming the leader), that its topic turned tiering off,
// or that the cluster cannot be reached; then that it is up to date.
func TestStatusByCluster(t *testing.T) {
	fc := newFakeCluster()
	fc.set("orders", idA, 2, 5, nil) // broker 2 leads
	r := clusterRig(t, fc)
	r.observe(WithCluster(fc))
	topicID(t, r.dir(), idA)
	ts := r.now.UnixMilli()
	writeSegment(t, r.dir(), 0, seq(0, 10), same(ts, 10), 10)
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	for _, step := range []struct {
		name   string
		set    func()
		state  remotelog.TierState
		reason remotelog.WaitReason
		detail string
	}{
		{"follower", func() {}, remotelog.TierWaiting, remotelog.WaitNotLeader, "names broker 2 the partition's leader"},
		{"disabled", func() {
			fc.set("orders", idA, 1, 6, map[string]cluster.ConfigValue{"remote.storage.enable": {Value: "false", Source: "DYNAMIC_TOPIC_CONFIG"}})
		}, remotelog.TierWaiting, remotelog.WaitTieringDisabled, "remote.storage.enable=false"},
		{"unreachable", func() { fc.down = true; r.c.cs = clusterState{} }, remotelog.TierWaiting, remotelog.WaitClusterUnreachable, "connection refused"},
		{"leader", func() {
			fc.down = false
			fc.set("orders", idA, 1, 6, map[string]cluster.ConfigValue{"remote.storage.enable": {Value: "true", Source: "DYNAMIC_TOPIC_CONFIG"}})
		}, remotelog.TierUpToDate, "", "every rolled segment"},
	} {
		step.set()
		r.c.Sync(t.Context())
		if st := r.status(r.tp); st.State != step.state || st.Reason != step.reason || !strings.Contains(st.Detail, step.detail) {
			t.Fatalf("%s: status %+v", step.name, st)
		}
	}
}
