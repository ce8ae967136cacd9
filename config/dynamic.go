package config

import (
	"slices"
	"strings"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/remoteread"
)

// Kafka draws the line between the settings a broker takes while running
// (dynamic: retention, the remote log manager's quotas and pools, cache
// sizes, log levels) and those it reads only at start (read-only: log
// dirs, listeners, the storage plugin); tierd follows it. This file says
// which of tierd.yaml's settings are which, and tells two configs apart
// setting by setting, for a reload (SIGHUP, "tierd config reload") and
// "tierd config show".

// Change is one setting that differs between the running config and the
// file. Its JSON form is what tierd-reload.json records.
type Change struct {
	// Key is the setting's full key, "copier.log.retention.ms".
	Key string `json:"key"`
	// Old and New are the values as Flatten shows them; "(unset)" on the
	// side that lacks the key (a topic added or removed); a secret's are
	// "(not shown)" and "(changed, not shown)".
	Old string `json:"old"`
	New string `json:"new"`
	// Why is a refused change's rule, when not "static setting".
	Why string `json:"why,omitempty"`
}

// Reason is a refused change's rule: Why, or "static setting, restart
// needed".
func (c Change) Reason() string {
	if c.Why != "" {
		return c.Why
	}
	return "static setting, restart needed"
}

// DiskBudgetKey is dynamic only while the disk tier stays on (see
// remoteread.Config.DiskBudgetDynamic).
const DiskBudgetKey = "fetch.remote.fetch.chunk.cache.disk.bytes"

// DynamicKey reports whether a running tierd applies a change of key (a
// full key, "copier.log.retention.ms") from a reloaded file: log_level,
// memory_limit_bytes, copier.DynamicKeys, every per-topic key
// (copier.topics.*) and remoteread.DynamicKeys. DiskBudgetKey is one of them,
// but only while the disk tier stays on (Diff checks that).
func DynamicKey(key string) bool {
	section, rest, _ := strings.Cut(key, ".")
	switch section {
	case "log_level", "memory_limit_bytes":
		return true
	case "copier":
		return slices.Contains(copier.DynamicKeys, rest) || strings.HasPrefix(rest, "topics.")
	case "fetch":
		return slices.Contains(remoteread.DynamicKeys, rest)
	}
	return false
}

// WithDynamic returns c with next's dynamic settings, those DynamicKey
// names, and next's file (Path, Warnings, Source) when next was loaded
// from one.
func (c Config) WithDynamic(next Config) Config {
	c.Copier = c.Copier.WithDynamic(next.Copier)
	c.Fetch.Config = c.Fetch.WithDynamic(next.Fetch.Config)
	c.LogLevel, c.MemoryLimitBytes = next.LogLevel, next.MemoryLimitBytes
	if next.meta != nil {
		c.meta = next.meta
	}
	return c
}

// Diff lists the settings that differ between running and next, in
// Flatten's order, split into dynamic ones (a reload applies them) and
// static ones (a restart is needed). Both are empty, never nil, when
// nothing differs. A key present on one side only and unset on the
// other (a topic's key that inherits) is no change.
func Diff(running, next Config) (dynamic, static []Change) {
	dynamic, static = []Change{}, []Change{} // empty, never null, in tierd-reload.json
	old, nw := map[string]Setting{}, map[string]Setting{}
	var keys []string
	for _, s := range Flatten(running) {
		old[s.Key] = s
		keys = append(keys, s.Key)
	}
	for _, s := range Flatten(next) {
		nw[s.Key] = s
		if _, ok := old[s.Key]; !ok {
			keys = append(keys, s.Key)
		}
	}
	for _, k := range keys {
		so, ok1 := old[k]
		sn, ok2 := nw[k]
		if ok1 && ok2 && so.cmp == sn.cmp {
			continue
		}
		o, n := so.Value, sn.Value
		if Secret(k) {
			o, n = "(not shown)", "(changed, not shown)"
		}
		if !ok1 {
			o = "(unset)"
		}
		if !ok2 {
			n = "(unset)"
		}
		if (!ok1 && unsetValue(sn.cmp)) || (!ok2 && unsetValue(so.cmp)) {
			continue // a key absent on one side and unset on the other
		}
		c := Change{Key: k, Old: o, New: n}
		switch {
		case DynamicKey(k) && (k != DiskBudgetKey || running.Fetch.DiskBudgetDynamic(next.Fetch.Config)):
			dynamic = append(dynamic, c)
		case k == DiskBudgetKey:
			c.Why = remoteread.DiskBudgetRule
			static = append(static, c)
		default:
			static = append(static, c)
		}
	}
	return dynamic, static
}

// unsetValue reports whether a flattened value says "not set" ("-" for
// an unset optional, as a per-topic key prints, or an empty string).
func unsetValue(v string) bool { return v == "-" || v == "" || v == `""` }
