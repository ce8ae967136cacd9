package groups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
)

// Store keeps groups durably: a group's record (its generation, protocol
// and members with their assignments, encoded by this package, doc.go)
// and its committed offsets, one value per partition. rlmm.Store is one,
// in Pebble. Writes must be durable (synced) when they return.
type Store interface {
	// WriteGroup writes group's record (nil: unchanged) and the given
	// offsets (values encoded by this package) in one durable write.
	WriteGroup(group string, record []byte, offsets map[remotelog.TopicPartition][]byte) error
	// DeleteGroup deletes the given offsets of group, or, with nil
	// partitions, the group's record and all its offsets.
	DeleteGroup(group string, partitions []remotelog.TopicPartition) error
	// LoadGroups calls fn with every group kept, its record (nil when only
	// offsets are kept) and offsets.
	LoadGroups(fn func(group string, record []byte, offsets map[remotelog.TopicPartition][]byte) error) error
}

// Coordinator is a classic group coordinator (Kafka's group protocol as
// its GroupCoordinator serves consumers) for every group: it is safe for
// concurrent use; Run loads the groups kept and drives their timers.
type Coordinator struct {
	cfg   Config
	store Store
	log   *slog.Logger
	now   func() time.Time

	reg prometheus.Registerer
	hw  HighWatermarks
	m   *metrics

	loadMu sync.Mutex // one Load at a time
	loaded atomic.Bool
	mu     sync.Mutex
	groups map[string]*group
}

// Option sets an optional collaborator.
type Option func(*Coordinator)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *Coordinator) { c.log = l } }

// withClock sets the clock (tests).
func withClock(now func() time.Time) Option { return func(c *Coordinator) { c.now = now } }

// New returns a coordinator over store. Errors: cfg's (Validate), the
// metrics' registration.
func New(cfg Config, store Store, opts ...Option) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("groups: no store")
	}
	c := &Coordinator{cfg: cfg, store: store, log: slog.New(slog.DiscardHandler), now: time.Now, groups: map[string]*group{}, m: newMetrics()}
	for _, o := range opts {
		o(c)
	}
	if err := c.register(); err != nil {
		return nil, err
	}
	return c, nil
}

// tick is how often timers (session, join, sync deadlines) are checked.
const tick = 100 * time.Millisecond

// Run loads the groups kept, then drives the groups' timers and expires
// offsets every offsets.retention.check.interval.ms until ctx ends (nil).
// Errors: the store's, loading.
func (c *Coordinator) Run(ctx context.Context) error {
	if err := c.Load(); err != nil {
		return err
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	lastExpiry := c.now()
	for {
		select {
		case <-ctx.Done():
			c.stop()
			return nil
		case <-t.C:
		}
		now := c.now()
		c.tickAll(now)
		if now.Sub(lastExpiry) >= time.Duration(c.cfg.OffsetsRetentionCheckIntervalMs)*time.Millisecond {
			lastExpiry = now
			c.ExpireOffsets()
		}
	}
}

// stop answers every waiting request: the coordinator is going away
// (COORDINATOR_NOT_AVAILABLE makes clients look for it again).
func (c *Coordinator) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		for _, m := range g.members {
			if m.join != nil {
				m.join <- joinError(m.id, codeCoordinatorNotAvailable)
				m.join = nil
			}
			if m.sync != nil {
				m.sync <- syncError(codeCoordinatorNotAvailable)
				m.sync = nil
			}
		}
	}
}

// Load reads the groups kept in the store: a group with members comes
// back Stable with its generation and assignments (each member's session
// starts over), one without Empty. Until it returns, requests get
// COORDINATOR_LOAD_IN_PROGRESS. Calls after the first that succeeded
// return nil at once (Run loads too).
func (c *Coordinator) Load() error {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	if c.loaded.Load() {
		return nil
	}
	now := c.now()
	groups := map[string]*group{}
	err := c.store.LoadGroups(func(name string, record []byte, offsets map[remotelog.TopicPartition][]byte) error {
		g := newGroup(name, now)
		if record != nil {
			if err := g.decode(record, now); err != nil {
				return fmt.Errorf("group %q: %w", name, err)
			}
		}
		for tp, v := range offsets {
			var o offset
			if err := json.Unmarshal(v, &o); err != nil {
				return fmt.Errorf("group %q offset of %s: %w", name, tp, err)
			}
			g.offsets[tp] = o
		}
		groups[name] = g
		return nil
	})
	if err != nil {
		return fmt.Errorf("groups: load: %w", err)
	}
	n := len(groups)
	c.mu.Lock()
	c.groups = groups
	c.mu.Unlock()
	c.loaded.Store(true)
	c.log.Info("consumer groups loaded", "groups", n)
	return nil
}

// tickAll runs every group's timers at now.
func (c *Coordinator) tickAll(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		c.timers(g, now)
	}
}

// timers completes the join phase at its deadline, removes members that
// did not sync in time or whose session expired, and drops KIP-394
// member ids never used. Called with c.mu held.
func (c *Coordinator) timers(g *group, now time.Time) {
	for id, until := range g.pending {
		if now.After(until) {
			delete(g.pending, id)
		}
	}
	// Sessions first, in every state (Kafka's
	// expireClassicGroupMemberHeartbeat): a member not waiting in
	// JoinGroup or SyncGroup whose session passed is removed, so a member
	// dead during a rebalance holds it up for its session timeout, not the
	// rebalance timeout.
	expired := false
	for id, m := range g.members {
		if m.join == nil && m.sync == nil && now.After(m.deadline) {
			c.log.Info("consumer group member's session expired", "group", g.name, "member", id, "session_timeout", m.session)
			c.m.removed.WithLabelValues("session_expired").Inc()
			g.remove(id, codeUnknownMemberID)
			expired = true
		}
	}
	switch g.state {
	case PreparingRebalance:
		if !now.Before(g.joinDeadline) || (!g.initialDelay && g.allJoined()) {
			c.completeJoin(g, now)
		}
		return
	case CompletingRebalance:
		if now.After(g.syncDeadline) {
			for id, m := range g.members {
				if m.sync == nil && id != "" {
					c.m.removed.WithLabelValues("not_synced").Inc()
					g.remove(id, codeRebalanceInProgress)
				}
			}
			c.prepareRebalance(g, now)
			return
		}
	}
	if expired && (g.state == Stable || g.state == CompletingRebalance) {
		c.prepareRebalance(g, now)
	}
}

// persist writes g's record (and offsets, when given) to the store.
// Called with c.mu held.
func (c *Coordinator) persist(g *group, offsets map[remotelog.TopicPartition][]byte) error {
	rec, err := g.encode()
	if err != nil {
		return err
	}
	return c.store.WriteGroup(g.name, rec, offsets)
}

// MaxGroupIDBytes is the longest group id taken (INVALID_GROUP_ID past
// it): what a Kafka string of a 16-bit length holds, and rlmm's keys.
const MaxGroupIDBytes = 1<<15 - 1

// lookup returns the group named, creating it (Empty) when create is
// set; nil and a code when it cannot: loading, a group id too long
// (INVALID_GROUP_ID), or too many groups.
func (c *Coordinator) lookup(name string, create bool, now time.Time) (*group, int16) {
	if !c.loaded.Load() {
		return nil, codeCoordinatorLoadInProgress
	}
	if len(name) > MaxGroupIDBytes {
		return nil, codeInvalidGroupID
	}
	g, ok := c.groups[name]
	switch {
	case ok:
		return g, 0
	case !create:
		return nil, 0
	case len(c.groups) >= c.cfg.MaxGroups:
		return nil, codeCoordinatorNotAvailable
	}
	g = newGroup(name, now)
	c.groups[name] = g
	return g, 0
}
