package daemon

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/remoteread"
)

// TestReloadOutput: a topic added to the file reports only the keys it
// sets, not its unset ones ("(unset) -> -"); a reload that changes nothing
// records "applied": [] and "refused": [], never null; a refused change of
// the disk budget gives the exact rule; a value logged is not quoted twice.
func TestReloadOutput(t *testing.T) {
	running, next, ms := config.Default(), config.Default(), int64(3600000)
	next.Copier.Topics = map[string]topics.TopicConfig{"orders": {Retention: topics.Retention{RetentionMs: &ms}}}
	dyn, static := config.Diff(running, next)
	if len(dyn) != 1 || dyn[0].Key != "copier.topics.orders.retention.ms" || dyn[0].New != "3600000" || len(static) != 0 {
		t.Fatalf("adding a topic with one key: applied %+v, refused %+v; want only its retention.ms", dyn, static)
	}
	if d := (ReloadResult{Applied: dyn}).Describe(); strings.Contains(d, "(unset) -> -") {
		t.Fatalf("describe:\n%s", d)
	}

	dyn, static = config.Diff(running, running)
	data, err := json.Marshal(ReloadResult{Applied: dyn, Refused: static})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"applied":[]`) || !strings.Contains(string(data), `"refused":[]`) {
		t.Fatalf("an unchanged reload records %s", data)
	}

	on := config.Default()
	on.Fetch.Cache.DiskBytes = 1 << 30 // the tier is off: disk.dir is empty
	_, static = config.Diff(config.Default(), on)
	var refused config.Change
	for _, c := range static {
		if c.Key == config.DiskBudgetKey {
			refused = c
		}
	}
	d := (ReloadResult{Refused: []config.Change{refused}}).Describe()
	if refused.Key == "" || !strings.Contains(d, remoteread.DiskBudgetRule) || strings.Contains(d, "static setting") {
		t.Fatalf("the disk budget with the tier off: %+v\n%s", refused, d)
	}
	if got := plain(`"127.0.0.1:27450"`); got != "127.0.0.1:27450" {
		t.Fatalf("plain = %q", got)
	}
}
