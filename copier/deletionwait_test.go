package copier

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/remotelog"
)

// TestDeleteOnDisableTopicVanished: a tiering-disabled deletion the
// cluster's topic configs ordered, due while the cluster no longer lists
// the topic, neither runs nor is cancelled: tierd.yaml alone is no proof.
// The partition's status says what it waits for and how to act, the log
// says so once, the pass is no failure; once the cluster lists the topic
// again with the same configs, the deletion runs.
func TestDeleteOnDisableTopicVanished(t *testing.T) {
	for _, keepDir := range []bool{true, false} {
		name := "directory gone"
		if keepDir {
			name = "directory kept"
		}
		t.Run(name, func(t *testing.T) {
			fc := newFakeCluster()
			fc.set("orders", idA, 1, 0, nil)
			r := clusterRig(t, fc)
			logs, _ := r.observe(WithCluster(fc))
			objs := tieredTwo(t, r, idA)
			disabled := map[string]cluster.ConfigValue{
				"remote.storage.enable":        {Value: "false", Source: "DYNAMIC_TOPIC_CONFIG"},
				"remote.log.delete.on.disable": {Value: "true", Source: "DYNAMIC_TOPIC_CONFIG"},
			}
			fc.set("orders", idA, 1, 0, disabled)
			r.sync()
			if ds, _ := r.store.Deletions(nil); len(ds) != 1 || ds[0].Reason != remotelog.ReasonTieringDisabled {
				t.Fatalf("deletions %+v", ds)
			}
			fc.remove("orders")
			if !keepDir {
				os.RemoveAll(r.dir())
			}
			r.now = r.now.Add(2 * time.Hour)
			for i := 0; i < 2; i++ {
				if _, err := r.c.Sync(context.Background()); err != nil {
					t.Fatalf("pass %d: %v", i, err)
				}
			}
			if got := r.sortedObjects(); !reflect.DeepEqual(got, objs) {
				t.Fatal("the deletion ran without the topic's configs")
			}
			if j := r.journal(); !reflect.DeepEqual(j, []string{"scheduled"}) {
				t.Fatalf("journal %v, want the deletion still pending", j)
			}
			st := r.status(r.tp)
			if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitTieringDisabled ||
				!strings.Contains(st.Detail, "not in the kafka cluster's metadata") || !strings.Contains(st.Detail, "tierd partitions restore") ||
				!strings.Contains(st.Detail, "tierd topics delete") {
				t.Fatalf("status %+v", st)
			}
			if w := logs.with("scheduled deletion waits for the topic's configs"); len(w) != 1 {
				t.Fatalf("%d warnings over two passes, want one", len(w))
			}
			if s := r.c.Status(); s.LastSuccessMs != r.now.UnixMilli() {
				t.Fatalf("a pass whose deletion waits counted as failed: %+v", s)
			}

			fc.set("orders", idA, 1, 0, disabled)
			r.sync()
			if n := len(r.objects()); n != 0 {
				t.Fatalf("%d objects once the configs were readable again", n)
			}
		})
	}
}
