package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/remoteread"
)

// Reloading tierd.yaml. Kafka draws the line between the settings a
// broker takes while running (dynamic: retention, the remote log
// manager's quotas and pools, cache sizes, log levels) and those it reads
// only at start (read-only: log dirs, listeners, the storage plugin);
// tierd follows it. On SIGHUP, and for "tierd config reload" (which sends
// SIGHUP to the tierd holding the config's log dirs), a running tierd
// re-reads its file, applies the dynamic settings that changed (the
// copier's at its next pass, the others at once), logs each change old ->
// new, and refuses the static ones that changed (restart needed) while
// keeping their running values. A file that does not load changes
// nothing. The outcome is logged and written to
// <metadata dir>/tierd-reload.json for "tierd config reload" to print.

// reloadFile is the outcome of the last reload, in the metadata dir.
const reloadFile = "tierd-reload.json"

// change is one setting that differs between the running config and the
// file.
type change struct {
	Key string `json:"key"`
	Old string `json:"old"`
	New string `json:"new"`
	Why string `json:"why,omitempty"` // a refused change's rule, when not "static setting"
}

// reloadResult is what one reload did.
type reloadResult struct {
	PID      int      `json:"pid"`
	Seq      int64    `json:"seq"`
	TimeMs   int64    `json:"timeMs"`
	File     string   `json:"file"`
	Applied  []change `json:"applied"`
	Refused  []change `json:"refused"` // static settings: restart needed
	Warnings []string `json:"warnings,omitempty"`
	Error    string   `json:"error,omitempty"` // the file was not used
}

// diskBudgetKey is dynamic only while the disk tier stays on (see
// remoteread.Config.DiskBudgetDynamic).
const diskBudgetKey = "fetch.remote.fetch.chunk.cache.disk.bytes"

// dynamicKey reports whether a running tierd applies a change of key (a
// full key, "copier.log.retention.ms") from a reloaded file.
func dynamicKey(key string) bool {
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

// withDynamic returns c with next's dynamic settings, those dynamicKey
// names.
func (c config) withDynamic(next config) config {
	c.Copier = c.Copier.WithDynamic(next.Copier)
	c.Fetch.Config = c.Fetch.WithDynamic(next.Fetch.Config)
	c.LogLevel, c.MemoryLimitBytes = next.LogLevel, next.MemoryLimitBytes
	if next.meta != nil {
		c.meta = next.meta
	}
	return c
}

// diff lists the settings that differ between running and next, split
// into dynamic and static ones.
func diff(running, next config) (dynamic, static []change) {
	dynamic, static = []change{}, []change{} // empty, never null, in tierd-reload.json
	old, nw := map[string]setting{}, map[string]setting{}
	var keys []string
	for _, s := range flatten(running) {
		old[s.key] = s
		keys = append(keys, s.key)
	}
	for _, s := range flatten(next) {
		nw[s.key] = s
		if _, ok := old[s.key]; !ok {
			keys = append(keys, s.key)
		}
	}
	for _, k := range keys {
		so, ok1 := old[k]
		sn, ok2 := nw[k]
		if ok1 && ok2 && so.cmp == sn.cmp {
			continue
		}
		o, n := so.value, sn.value
		if secret(k) {
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
		c := change{Key: k, Old: o, New: n}
		switch {
		case dynamicKey(k) && (k != diskBudgetKey || running.Fetch.DiskBudgetDynamic(next.Fetch.Config)):
			dynamic = append(dynamic, c)
		case k == diskBudgetKey:
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

// reason is a refused change's rule.
func (c change) reason() string {
	if c.Why != "" {
		return c.Why
	}
	return "static setting, restart needed"
}

// plain returns a flattened value without its YAML quotes, for a log
// attribute (which quotes it again).
func plain(v string) string {
	if u, err := strconv.Unquote(v); err == nil {
		return u
	}
	return v
}

// reloader reloads a running tierd's config.
type reloader struct {
	log   *slog.Logger
	level *slog.LevelVar // nil: the log level is not reloadable

	mu      sync.Mutex
	running config
	seq     int64
	parts   []reloadPart
}

// reloadPart is a part of tierd a reload hands the new running config to.
type reloadPart struct {
	name string
	fn   func(cfg config) error
}

func newReloader(cfg config, log *slog.Logger, level *slog.LevelVar) *reloader {
	return &reloader{running: cfg, log: log, level: level}
}

// Register adds a part that a reload hands the new running config to,
// after the config was accepted, in the order registered (the copier and
// the fetch server first; a TLS listener reloading its certificate
// registers here too). A part's error is logged and reported; the others
// still run.
func (r *reloader) Register(name string, fn func(cfg config) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.parts = append(r.parts, reloadPart{name, fn})
}

// notifyHUP starts catching SIGHUP into a channel for run, so that from
// then on SIGHUP never ends the process; one arriving before run starts
// is kept and reloads then.
func notifyHUP() chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch
}

// run reloads on every SIGHUP caught in ch (from notifyHUP) until ctx
// ends, then stops catching them.
func (r *reloader) run(ctx context.Context, ch chan os.Signal) error {
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
			r.reload()
		}
	}
}

// reload re-reads the file the running config came from and applies it.
func (r *reloader) reload() reloadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	res := reloadResult{PID: os.Getpid(), Seq: r.seq, TimeMs: time.Now().UnixMilli(), Applied: []change{}, Refused: []change{}}
	defer func() { r.record(res) }()
	if r.running.meta == nil {
		res.Error = "this tierd was not started from a config file"
		r.log.Error("config reload: nothing to reload", "err", res.Error)
		return res
	}
	res.File = r.running.meta.path
	next, err := loadConfig(res.File)
	if err != nil {
		res.Error = err.Error()
		r.log.Error("config reload refused: the file does not load; tierd keeps running with its config", "file", res.File, "err", err)
		return res
	}
	res.Warnings = next.warnings()
	for _, w := range res.Warnings {
		r.log.Warn("config reload: old spelling", "file", res.File, "warning", w)
	}
	res.Applied, res.Refused = diff(r.running, next)
	merged := r.running.withDynamic(next)
	if err := merged.validate(); err != nil {
		res.Error, res.Applied = err.Error(), []change{}
		r.log.Error("config reload refused: the dynamic settings do not fit the running static ones; tierd keeps running with its config",
			"file", res.File, "err", err)
		return res
	}
	for _, c := range res.Refused {
		r.log.Error("config change refused: restart needed; the running value stays", "key", c.Key, "running", plain(c.Old), "file", plain(c.New), "why", c.reason())
	}
	if r.level != nil {
		level, _ := parseLevel(merged.LogLevel)
		r.level.Set(level)
	}
	for _, p := range r.parts {
		if err := p.fn(merged); err != nil {
			res.Error = strings.TrimPrefix(res.Error+"; ", "; ") + p.name + ": " + err.Error()
			r.log.Error("config reload: a part could not take the new config", "part", p.name, "err", err)
		}
	}
	r.running = merged
	for _, c := range res.Applied {
		when := "now"
		if strings.HasPrefix(c.Key, "copier.") {
			when = "at the next pass"
		}
		r.log.Info("config change applied", "key", c.Key, "old", plain(c.Old), "new", plain(c.New), "applies", when)
	}
	r.log.Info("config reloaded", "file", res.File, "applied", len(res.Applied), "refused", len(res.Refused))
	return res
}

// record writes a reload's outcome next to the metadata, atomically, for
// "tierd config reload" (best effort: the log has it too).
func (r *reloader) record(res reloadResult) {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return
	}
	p := filepath.Join(r.running.Metadata.Dir, reloadFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		r.log.Warn("config reload: could not record the outcome", "file", p, "err", err)
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		r.log.Warn("config reload: could not record the outcome", "file", p, "err", err)
	}
}

// readReload reads the outcome of the last reload a tierd recorded in a
// metadata dir; ok false when there is none.
func readReload(metadataDir string) (res reloadResult, ok bool) {
	data, err := os.ReadFile(filepath.Join(metadataDir, reloadFile))
	if err != nil || json.Unmarshal(data, &res) != nil {
		return res, false
	}
	return res, true
}

// applyMemoryLimit sets Go's soft memory limit for cfg (see memoryLimit)
// unless GOMEMLIMIT is set; it returns the limit set, 0 for none.
func applyMemoryLimit(cfg config) int64 {
	limit := memoryLimit(cfg)
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	} else {
		debug.SetMemoryLimit(1<<63 - 1)
	}
	return limit
}

// describe says what a reload did, for "tierd config reload".
func (res reloadResult) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tierd pid %d reloaded %s\n", res.PID, res.File)
	for _, w := range res.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	if len(res.Applied) == 0 && len(res.Refused) == 0 && res.Error == "" {
		b.WriteString("no setting changed\n")
	}
	for _, c := range res.Applied {
		when := "now"
		if strings.HasPrefix(c.Key, "copier.") {
			when = "at the next pass"
		}
		fmt.Fprintf(&b, "applied: %s: %s -> %s (%s)\n", c.Key, c.Old, c.New, when)
	}
	for _, c := range res.Refused {
		fmt.Fprintf(&b, "refused: %s: %s -> %s: %s; tierd keeps %s\n", c.Key, c.Old, c.New, c.reason(), c.Old)
	}
	if res.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", res.Error)
	}
	return b.String()
}
