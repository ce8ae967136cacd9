package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tierd/tierd/config"
)

// Reloading tierd.yaml. Kafka draws the line between the settings a
// broker takes while running (dynamic: retention, the remote log
// manager's quotas and pools, cache sizes, log levels) and those it reads
// only at start (read-only: log dirs, listeners, the storage plugin);
// tierd follows it (config.DynamicKey). On SIGHUP, and for "tierd config
// reload" (which sends SIGHUP to the tierd holding the config's log
// dirs), a running tierd
// re-reads its file, applies the dynamic settings that changed (the
// copier's at its next pass, the others at once), logs each change old ->
// new, and refuses the static ones that changed (restart needed) while
// keeping their running values. A file that does not load changes
// nothing. The outcome is logged and written to
// <metadata dir>/tierd-reload.json for "tierd config reload" to print.

// ReloadFile is the outcome of the last reload, in the metadata dir (a
// ReloadResult, JSON).
const ReloadFile = "tierd-reload.json"

// ReloadResult is what one reload did.
type ReloadResult struct {
	PID int `json:"pid"` // the reloading tierd's process id
	// Seq counts the reloads of that process, from 1.
	Seq      int64           `json:"seq"`
	TimeMs   int64           `json:"timeMs"` // when it began, Unix ms
	File     string          `json:"file"`   // the file read again
	Applied  []config.Change `json:"applied"`
	Refused  []config.Change `json:"refused"` // static settings: restart needed
	Warnings []string        `json:"warnings,omitempty"`
	Error    string          `json:"error,omitempty"` // the file was not used
}

// plain returns a flattened value without its YAML quotes, for a log
// attribute (which quotes it again).
func plain(v string) string {
	if u, err := strconv.Unquote(v); err == nil {
		return u
	}
	return v
}

// Reloader reloads a running tierd's config (Reload) on each SIGHUP
// (Run) and hands the new config to the parts registered. Safe for
// concurrent use.
type Reloader struct {
	log   *slog.Logger
	level *slog.LevelVar // nil: the log level is not reloadable

	mu      sync.Mutex
	running config.Config
	seq     int64
	parts   []reloadPart
}

// reloadPart is a part of tierd a reload hands the new running config to.
type reloadPart struct {
	name string
	fn   func(cfg config.Config) error
}

// NewReloader returns a reloader whose running config is cfg (loaded
// from a file: a config built in code has nothing to reload), logging to
// log; level, when not nil, is the log handler's level, which a reload
// sets from log_level.
func NewReloader(cfg config.Config, log *slog.Logger, level *slog.LevelVar) *Reloader {
	return &Reloader{running: cfg, log: log, level: level}
}

// Register adds a part that a reload hands the new running config to,
// after the config was accepted, in the order registered (the copier and
// the fetch server first; a TLS listener reloading its certificate
// registers here too). A part's error is logged and reported; the others
// still run.
func (r *Reloader) Register(name string, fn func(cfg config.Config) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.parts = append(r.parts, reloadPart{name, fn})
}

// NotifyHUP starts catching SIGHUP into a channel for Run, so that from
// then on SIGHUP never ends the process; one arriving before run starts
// is kept and reloads then.
func NotifyHUP() chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch
}

// Run reloads on every SIGHUP caught in ch (from NotifyHUP) until ctx
// ends, then stops catching them. It returns nil.
func (r *Reloader) Run(ctx context.Context, ch chan os.Signal) error {
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
			r.Reload()
		}
	}
}

// Reload re-reads the file the running config came from and applies it:
// the dynamic settings that changed (config.Diff) go to the running
// config and to every part registered; the static ones are refused,
// keeping their running values. A file that does not load, or whose
// dynamic settings do not validate with the running static ones, changes
// nothing (ReloadResult.Error says why). The outcome is logged and
// written to ReloadFile in the metadata dir.
func (r *Reloader) Reload() ReloadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	res := ReloadResult{PID: os.Getpid(), Seq: r.seq, TimeMs: time.Now().UnixMilli(), Applied: []config.Change{}, Refused: []config.Change{}}
	defer func() { r.record(res) }()
	if r.running.Path() == "" {
		res.Error = "this tierd was not started from a config file"
		r.log.Error("config reload: nothing to reload", "err", res.Error)
		return res
	}
	res.File = r.running.Path()
	next, err := config.Load(res.File)
	if err != nil {
		res.Error = err.Error()
		r.log.Error("config reload refused: the file does not load; tierd keeps running with its config", "file", res.File, "err", err)
		return res
	}
	res.Warnings = next.Warnings()
	for _, w := range res.Warnings {
		r.log.Warn("config reload: old spelling", "file", res.File, "warning", w)
	}
	res.Applied, res.Refused = config.Diff(r.running, next)
	merged := r.running.WithDynamic(next)
	if err := merged.Validate(); err != nil {
		res.Error, res.Applied = err.Error(), []config.Change{}
		r.log.Error("config reload refused: the dynamic settings do not fit the running static ones; tierd keeps running with its config",
			"file", res.File, "err", err)
		return res
	}
	for _, c := range res.Refused {
		r.log.Error("config change refused: restart needed; the running value stays", "key", c.Key, "running", plain(c.Old), "file", plain(c.New), "why", c.Reason())
	}
	if r.level != nil {
		level, _ := config.ParseLevel(merged.LogLevel)
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
func (r *Reloader) record(res ReloadResult) {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return
	}
	p := filepath.Join(r.running.Metadata.Dir, ReloadFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		r.log.Warn("config reload: could not record the outcome", "file", p, "err", err)
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		r.log.Warn("config reload: could not record the outcome", "file", p, "err", err)
	}
}

// ReadReload reads the outcome of the last reload a tierd recorded in a
// metadata dir; ok false when there is none (or it does not parse).
func ReadReload(metadataDir string) (res ReloadResult, ok bool) {
	data, err := os.ReadFile(filepath.Join(metadataDir, ReloadFile))
	if err != nil || json.Unmarshal(data, &res) != nil {
		return res, false
	}
	return res, true
}

// ApplyMemoryLimit sets Go's soft memory limit for cfg (see
// config.Config.MemoryLimit) unless GOMEMLIMIT is set; it returns the
// limit set, bytes, 0 for none.
func ApplyMemoryLimit(cfg config.Config) int64 {
	limit := cfg.MemoryLimit()
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

// Describe says what a reload did, one line each, for "tierd config
// reload".
func (res ReloadResult) Describe() string {
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
		fmt.Fprintf(&b, "refused: %s: %s -> %s: %s; tierd keeps %s\n", c.Key, c.Old, c.New, c.Reason(), c.Old)
	}
	if res.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", res.Error)
	}
	return b.String()
}
