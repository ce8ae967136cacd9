package copier

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
)

// Files that mark a Kafka log dir: the broker's LogManager creates .lock
// in every log dir and holds a lock on it for as long as it runs (and
// deletes it on a clean shutdown); meta.properties (cluster.id, node.id,
// directory.id) is written by "kafka-storage format" or the broker's
// first start, and stays.
const (
	BrokerLockFile     = ".lock"
	MetaPropertiesFile = "meta.properties"
)

// ErrLogDirUnavailable refuses an operator's deletion while a configured
// log dir is missing or unreadable: it may hold the partitions to delete.
var ErrLogDirUnavailable = fmt.Errorf("copier: a log dir is missing or unreadable (%w)", remotelog.ErrRefused)

// WithLogDirCheck sets a check of each log dir, made with the copier's
// own (it exists, is a directory, and can be listed): fn returns why dir
// is no longer the log dir tierd started on, nil while it is. tierd run
// checks that dir/.tierd.lock is still the file it locked at start, so
// that a disk unmounted under a mount point (an empty directory where
// the log dir was) is a missing log dir too. fn is called from several
// goroutines, and must be quick.
func WithLogDirCheck(fn func(dir string) error) Option { return func(c *Copier) { c.dirs.check = fn } }

// LogDirState is what tierd found about one configured log dir: whether
// it is there, and whether a broker owns it (then tierd renames and
// deletes no file in it, whatever broker_owned says: see
// Config.BrokerOwned).
type LogDirState struct {
	// Dir is the log dir, as configured.
	Dir string `json:"dir"`
	// Available is false when Dir is missing, not a directory, cannot be
	// listed, or is no longer the directory tierd started on (see
	// WithLogDirCheck), or a pass could not read its checkpoint files;
	// Err says why.
	Available bool   `json:"available"`
	Err       string `json:"error,omitempty"`
	// KafkaDir: Dir holds meta.properties or .lock, Kafka's files.
	KafkaDir bool `json:"kafkaDir"`
	// Locked: a process holds a lock on Dir/.lock, as a running broker
	// does. LockPID is its pid as tierd sees it (0: a process in another
	// pid namespace, such as a broker in another container; -1: none or
	// not known).
	Locked  bool `json:"locked"`
	LockPID int  `json:"lockPid"`
	// BrokerOwned: tierd renames and deletes no file in Dir (it copies
	// only; the broker's own retention trims the local log).
	BrokerOwned bool `json:"brokerOwned"`
	// Why says in a sentence why BrokerOwned is what it is; Owner, for a
	// broker-owned log dir, in a few words ("broker_owned: true", "a
	// running broker holds .lock (pid 812)").
	Why   string `json:"why"`
	Owner string `json:"owner,omitempty"`
}

// ProbeLogDirs returns the state of each of c's log dirs now, as a pass
// would find it, check (nil: none) standing for WithLogDirCheck's: for
// tools, and for tierd run before its copier exists.
func (c Config) ProbeLogDirs(check func(dir string) error) []LogDirState {
	out := make([]LogDirState, 0, len(c.LogDirs))
	for _, d := range c.LogDirs {
		out = append(out, probeLogDir(d, c.BrokerOwned, check))
	}
	return out
}

// dirAvailable returns why dir cannot serve as a log dir now, nil when it
// can: it exists, is a directory, can be listed, and passes check.
func dirAvailable(dir string, check func(string) error) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	if check != nil {
		return check(dir)
	}
	return nil
}

// probeLogDir finds out whether dir is available and whether a broker
// owns it, by setting (Config.BrokerOwned) and by what dir holds.
func probeLogDir(dir string, setting *bool, check func(string) error) LogDirState {
	st := LogDirState{Dir: dir, LockPID: -1, BrokerOwned: true}
	if err := dirAvailable(dir, check); err != nil {
		st.Err = err.Error()
		st.Why = "the log dir is unavailable (" + st.Err + "): tierd deletes nothing of what it may hold until it is back"
		st.Owner = "unavailable"
		return st
	}
	st.Available = true
	lockPath := filepath.Join(dir, BrokerLockFile)
	for _, name := range []string{MetaPropertiesFile, BrokerLockFile} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			if name == BrokerLockFile && isTierdLock(lockPath) {
				continue // left by a tierd killed mid-rename: not Kafka's
			}
			st.KafkaDir = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			st.Why = fmt.Sprintf("whether it is a Kafka log dir cannot be told (%v): tierd deletes no local file in it", err)
			st.Owner = "not known: " + name + " cannot be read"
			return st
		}
	}
	held, pid, err := lockHolder(lockPath)
	switch {
	case err != nil:
		st.Why = fmt.Sprintf("whether a broker holds %s cannot be checked (%v): tierd deletes no local file in it", lockPath, err)
		st.Owner = "not known: the broker's lock cannot be checked"
	case held:
		st.Locked, st.LockPID = true, pid
		st.Owner = fmt.Sprintf("a running broker holds %s (%s)", BrokerLockFile, pidText(pid))
		st.Why = fmt.Sprintf("a running process (%s) holds a lock on %s, as a Kafka broker does while it runs: tierd deletes no local file in it",
			pidText(pid), lockPath)
		if setting != nil && !*setting {
			st.Why += "; broker_owned: false is overridden while the lock is held"
		}
	case setting != nil && *setting:
		st.Why = "broker_owned: true: tierd deletes no local file in it"
		st.Owner = "broker_owned: true"
	case setting != nil:
		st.BrokerOwned = false
		st.Why = fmt.Sprintf("broker_owned: false and no process holds %s: tierd applies local retention", lockPath)
	case st.KafkaDir:
		st.Owner = "a Kafka log dir, broker_owned unset"
		st.Why = fmt.Sprintf("a Kafka log dir (it holds %s or %s) and broker_owned is unset: tierd deletes no local file in it "+
			"(set broker_owned: false to apply local retention in a stopped broker's log dir)", MetaPropertiesFile, BrokerLockFile)
	default:
		st.BrokerOwned = false
		st.Why = fmt.Sprintf("not a Kafka log dir (no %s, no %s) and broker_owned is unset: tierd applies local retention", MetaPropertiesFile, BrokerLockFile)
	}
	return st
}

func pidText(pid int) string {
	switch {
	case pid > 0:
		return fmt.Sprintf("pid %d", pid)
	case pid == 0:
		return "a pid in another pid namespace"
	}
	return "an open file description lock, no pid"
}

// logDirs is the watch over the configured log dirs: it probes them
// (probe: a pass first, tierd run once at start), keeps the last probe
// and the last pass's faults, logs and counts each change, and answers
// whether they are available now (LogDirs, ready), what waits for them
// (waitForDirs, unavailableDirs, passFaults), and the in-process mutex
// of each one's .lock (exclusion). It is built from narrow dependencies,
// not the copier: see newCopier and New.
type logDirs struct {
	cfg   *Config            // the copier's current config: changed only between passes
	check func(string) error // nil: none (see WithLogDirCheck)
	log   *slog.Logger
	// available and brokerOwned are tierd_copier_log_dir_available and
	// tierd_copier_log_dir_broker_owned, by log dir.
	available, brokerOwned *prometheus.GaugeVec
	// once reports whether a log-once key is seen for the first time;
	// forget drops the log-once keys drop matches (the copier's notes,
	// which others keep too).
	once   func(key string) bool
	forget func(drop func(key string) bool)

	mu     sync.Mutex
	states map[string]LogDirState // by log dir; the last probe
	faults map[string]string      // the last pass's unreadable log dirs, and why
	excl   map[string]*sync.Mutex // by log dir: held while tierd holds its .lock (withoutBroker)
}

// newLogDirs returns the watch over cfg's log dirs, with no probe made
// yet, no check, and a discarding logger; once and forget are the log-once
// notes it shares. attach sets its logger and metrics.
func newLogDirs(cfg *Config, once func(key string) bool, forget func(drop func(key string) bool)) *logDirs {
	return &logDirs{cfg: cfg, log: slog.New(slog.DiscardHandler), once: once, forget: forget}
}

// attach sets the logger and the metrics d reports to, and creates the
// metrics' series of every log dir.
func (d *logDirs) attach(log *slog.Logger, m *metrics) {
	d.log, d.available, d.brokerOwned = log, m.dirAvailable, m.dirBrokerOwned
	for _, dir := range d.cfg.LogDirs {
		d.available.WithLabelValues(dir)
		d.brokerOwned.WithLabelValues(dir)
	}
}

// checkDir returns why dir cannot serve as a log dir now (dirAvailable,
// with WithLogDirCheck's check), nil when it can.
func (d *logDirs) checkDir(dir string) error { return dirAvailable(dir, d.check) }

// exclusion returns the mutex of a log dir's .lock (see withoutBroker).
func (d *logDirs) exclusion(dir string) *sync.Mutex {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.excl == nil {
		d.excl = map[string]*sync.Mutex{}
	}
	if d.excl[dir] == nil {
		d.excl[dir] = &sync.Mutex{}
	}
	return d.excl[dir]
}

// probe probes every log dir, records the states, sets the metrics
// and logs each log dir whose state changed (at the first probe, every
// one). A pass calls it first, and tierd run once at start.
func (d *logDirs) probe() map[string]LogDirState {
	out := make(map[string]LogDirState, len(d.cfg.LogDirs))
	for _, dir := range d.cfg.LogDirs {
		out[dir] = probeLogDir(dir, d.cfg.BrokerOwned, d.check)
	}
	d.mu.Lock()
	prev := d.states
	d.states = out
	d.mu.Unlock()
	for _, dir := range d.cfg.LogDirs {
		st, was := out[dir], prev[dir]
		d.available.WithLabelValues(dir).Set(boolGauge(st.Available))
		d.brokerOwned.WithLabelValues(dir).Set(boolGauge(st.BrokerOwned))
		if prev != nil && st.Available == was.Available && st.BrokerOwned == was.BrokerOwned && st.Why == was.Why {
			continue
		}
		switch {
		case !st.Available:
			d.log.Error("log dir unavailable: tierd is not ready; it deletes nothing, locally or remotely, of the partitions it may hold, "+
				"and refuses operator deletions, until it is back", "dir", dir, "err", st.Err)
		case prev != nil && !was.Available:
			d.log.Info("log dir available again", "dir", dir, "broker_owned", st.BrokerOwned, "why", st.Why)
		case st.Locked && d.cfg.BrokerOwned != nil && !*d.cfg.BrokerOwned:
			d.log.Warn("a broker runs on the log dir: tierd deletes no local file in it, whatever broker_owned says", "dir", dir,
				"broker_owned", false, "why", st.Why)
		default:
			d.log.Info("log dir ownership", "dir", dir, "broker_owned", st.BrokerOwned, "why", st.Why)
		}
	}
	return out
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ProbeLogDirs probes every log dir now, records and logs what it finds
// (as the next pass would), and returns it, in the order of log_dirs.
func (c *Copier) ProbeLogDirs() []LogDirState {
	m := c.dirs.probe()
	out := make([]LogDirState, 0, len(m))
	for _, d := range c.cfg.LogDirs {
		out = append(out, m[d])
	}
	return out
}

// setFaults records the log dirs this pass could not read. Once none is
// left, the notes logged once for the last ones may be logged again.
func (d *logDirs) setFaults(f map[string]string) {
	d.mu.Lock()
	had := len(d.faults) > 0
	d.faults = f
	d.mu.Unlock()
	if had && len(f) == 0 {
		d.forget(func(k string) bool { return strings.HasPrefix(k, "unseen ") || strings.Contains(k, " waits for ") })
	}
}

// LogDirs returns the state of every log dir, in the order of log_dirs:
// ownership as the last pass (or ProbeLogDirs) found it; availability
// checked now, and false too for a log dir the last pass could not read.
func (c *Copier) LogDirs() []LogDirState { return c.dirs.now() }

// now returns the state of every log dir, in the order of log_dirs (see
// Copier.LogDirs).
func (d *logDirs) now() []LogDirState {
	d.mu.Lock()
	states, faults := d.states, d.faults
	d.mu.Unlock()
	out := make([]LogDirState, 0, len(d.cfg.LogDirs))
	for _, dir := range d.cfg.LogDirs {
		st, ok := states[dir]
		if !ok {
			st = LogDirState{Dir: dir, LockPID: -1, BrokerOwned: true, Why: "not probed yet"}
		}
		fault, faulted := faults[dir]
		switch err := d.checkDir(dir); {
		case err != nil:
			st.Available, st.Err = false, err.Error()
		case faulted:
			st.Available, st.Err = false, fault
		default:
			st.Available, st.Err = true, "" // (back since the last probe: the next pass says more)
		}
		out = append(out, st)
	}
	return out
}

// LogDirsReady reports whether every log dir is available (see LogDirs),
// and when not, why, naming each one that is not: for /-/ready.
func (c *Copier) LogDirsReady() (bool, string) { return c.dirs.ready() }

// ready reports whether every log dir is available, and when not, why
// (see Copier.LogDirsReady).
func (d *logDirs) ready() (bool, string) {
	var bad []string
	for _, st := range d.now() {
		if !st.Available {
			bad = append(bad, fmt.Sprintf("log dir %s is unavailable (%s)", st.Dir, st.Err))
		}
	}
	if len(bad) == 0 {
		return true, ""
	}
	return false, strings.Join(bad, "; ") + ": tierd deletes nothing, locally or remotely, of the partitions it may hold, and refuses " +
		"'tierd topics delete', until it is back"
}

// unavailableDirs returns the log dirs unavailable now or in the last
// pass, sorted, with why: "" when there are none.
func (d *logDirs) unavailableDirs() string {
	var bad []string
	for _, st := range d.now() {
		if !st.Available {
			bad = append(bad, fmt.Sprintf("%s (%s)", st.Dir, st.Err))
		}
	}
	sort.Strings(bad)
	return strings.Join(bad, ", ")
}

// passFaults returns the log dirs the current pass found unavailable or
// could not read, with why: "" when there are none.
func (d *logDirs) passFaults() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var bad []string
	for dir, why := range d.faults {
		bad = append(bad, fmt.Sprintf("%s (%s)", dir, why))
	}
	sort.Strings(bad)
	return strings.Join(bad, ", ")
}

// holdUnseen holds, while a log dir is unavailable, every tiered
// partition the metadata store knows that the pass found in no log dir
// it could read: it may be in the missing one. Such a partition is not
// remote only; none of its remote data is deleted (its copies stay, no
// whole-partition deletion is scheduled or run) until the log dir is
// back. One line is logged for the log dir (logDirs.probe), none per
// partition.
func (c *Copier) holdUnseen(parts []*partition) {
	faults := c.dirs.passFaults()
	if faults == "" {
		return
	}
	tps, err := c.store.Partitions()
	if err != nil {
		return
	}
	seen := make(map[remotelog.TopicPartition]bool, len(parts))
	for _, p := range parts {
		seen[p.tp] = true
	}
	n := 0
	detail := "no live directory in the log dirs tierd could read, and log dir " + faults + " is unavailable: it may hold the partition; " +
		"its remote copies stay, and no deletion of them is scheduled, run or accepted, until the log dir is back"
	for _, tp := range tps {
		if seen[tp] || !c.tiered(tp) {
			continue
		}
		c.stateMu.Lock()
		c.held[tp] = heldLogDirUnavailable
		c.stateMu.Unlock()
		c.rep.waitHeld(tp, remotelog.WaitHeld, heldLogDirUnavailable, "held ("+heldLogDirUnavailable+"): "+detail)
		n++
	}
	if n > 0 && c.once("unseen "+faults) {
		c.m.heldTotal.WithLabelValues(heldLogDirUnavailable).Add(float64(n))
		c.log.Warn("partitions with no live directory held while a log dir is unavailable", "log_dirs", faults, "partitions", n)
	}
}

// waitForDirs says whether whole-partition deletions must wait this pass
// because a log dir is unavailable, and logs it once per set of log dirs.
func (d *logDirs) waitForDirs(what string) bool {
	faults := d.passFaults()
	if faults == "" {
		return false
	}
	if d.once(what + " waits for " + faults) {
		d.log.Warn(what+" wait while a log dir is unavailable: it may hold the partitions", "log_dirs", faults)
	}
	return true
}
