package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tierd/tierd/remoteread"
)

// TestReloadOutput: a topic added to the file reports only the keys it
// sets, not its unset ones ("(unset) -> -"); a reload that changes nothing
// records "applied": [] and "refused": [], never null; a refused change of
// the disk budget gives the exact rule; a value logged is not quoted twice.
func TestReloadOutput(t *testing.T) {
	running, err := loadYAML(t, base)
	if err != nil {
		t.Fatal(err)
	}
	next, err := loadYAML(t, strings.Replace(base, "  broker_id: 1\n", "  broker_id: 1\n  topics:\n    orders: {retention.ms: 3600000}\n", 1))
	if err != nil {
		t.Fatal(err)
	}
	dyn, static := diff(running, next)
	if len(dyn) != 1 || dyn[0].Key != "copier.topics.orders.retention.ms" || dyn[0].New != "3600000" || len(static) != 0 {
		t.Fatalf("adding a topic with one key: applied %+v, refused %+v; want only its retention.ms", dyn, static)
	}
	if d := (reloadResult{Applied: dyn}).describe(); strings.Contains(d, "(unset) -> -") {
		t.Fatalf("describe:\n%s", d)
	}

	dyn, static = diff(running, running)
	data, err := json.Marshal(reloadResult{Applied: dyn, Refused: static})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"applied":[]`) || !strings.Contains(string(data), `"refused":[]`) {
		t.Fatalf("an unchanged reload records %s", data)
	}

	on := defaultConfig()
	on.Fetch.Cache.DiskBytes = 1 << 30 // the tier is off: disk.dir is empty
	_, static = diff(defaultConfig(), on)
	var refused change
	for _, c := range static {
		if c.Key == diskBudgetKey {
			refused = c
		}
	}
	d := (reloadResult{Refused: []change{refused}}).describe()
	if refused.Key == "" || !strings.Contains(d, remoteread.DiskBudgetRule) || strings.Contains(d, "static setting") {
		t.Fatalf("the disk budget with the tier off: %+v\n%s", refused, d)
	}
	if got := plain(`"127.0.0.1:27450"`); got != "127.0.0.1:27450" {
		t.Fatalf("plain = %q", got)
	}
}

// TestBothSpellingsOneError: interval: next to its new key is one error,
// "not both", not also an unknown key (interval is a known old spelling).
func TestBothSpellingsOneError(t *testing.T) {
	_, err := loadYAML(t, strings.Replace(base, "  broker_id: 1\n", "  broker_id: 1\n  interval: 5s\n  remote.log.manager.task.interval.ms: 5000\n", 1))
	if err == nil || !strings.Contains(err.Error(), "not both") || strings.Contains(err.Error(), "unknown key") {
		t.Fatalf("both spellings: %v", err)
	}
}
