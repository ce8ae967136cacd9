package authz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// Source reads the ACLs in force: the Kafka cluster's (cluster.Client's
// ACLs) or an ACL file's (FileSource). from says where they came from,
// for status and logs (a broker, a path).
type Source interface {
	ACLs(ctx context.Context) (acls []kafkaacl.ACL, from string, err error)
}

// Rules an Authorizer answers with besides kafkaacl's (the Decision's
// Rule): no ACLs read yet, and ACLs past Config.MaxStale.
const (
	RuleNotLoaded = "NotLoaded"
	RuleStale     = "Stale"
)

// Option sets an optional collaborator.
type Option func(*Authorizer)

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(a *Authorizer) { a.log = l } }

// WithRegisterer registers the Authorizer's metrics (tierd_acl_*) with
// reg. Default: none registered.
func WithRegisterer(reg prometheus.Registerer) Option { return func(a *Authorizer) { a.reg = reg } }

// WithClock sets the clock, for tests. Default time.Now.
func WithClock(now func() time.Time) Option { return func(a *Authorizer) { a.now = now } }

// Authorizer decides requests with the ACLs its Source last gave,
// refreshed by Run, and Kafka's rules (kafkaacl.Authorizer). Safe for
// concurrent use; Authorize takes no lock.
type Authorizer struct {
	cfg   Config
	src   Source
	rules kafkaacl.Authorizer
	log   *slog.Logger
	reg   prometheus.Registerer
	now   func() time.Time
	m     *metrics
	cur   atomic.Pointer[state]
	kick  chan struct{}
}

// state is what the last reads gave.
type state struct {
	set      *kafkaacl.Set // nil until a read succeeds
	from     string
	loadedAt time.Time // the last successful read
	triedAt  time.Time
	err      error // the last read's, nil when it succeeded
	failures int   // reads failed since the last success
}

// New validates cfg and returns an Authorizer that denies every request
// but a super user's until its first read (Load, or Run).
func New(cfg Config, src Source, opts ...Option) (*Authorizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, errors.New("authz: no ACL source")
	}
	a := &Authorizer{cfg: cfg, src: src, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now,
		kick: make(chan struct{}, 1)}
	a.rules.AllowEveryoneIfNoACLFound = cfg.AllowEveryoneIfNoACLFound
	a.rules.SuperUsers = map[string]bool{}
	for _, p := range cfg.SuperUsers {
		a.rules.SuperUsers[p] = true
	}
	for _, o := range opts {
		o(a)
	}
	a.m = newMetrics(a.reg, a)
	a.cur.Store(&state{})
	return a, nil
}

// Authorize decides r: a super user is allowed; with no ACLs read yet
// (RuleNotLoaded) or the last read older than MaxStale while reads fail
// (RuleStale), r is denied; else kafkaacl's rules decide with the last
// ACLs read.
func (a *Authorizer) Authorize(r kafkaacl.Request) kafkaacl.Decision {
	if a.rules.SuperUsers[r.Principal] {
		return kafkaacl.Decision{Allowed: true, Rule: "SuperUser"}
	}
	st := a.cur.Load()
	switch {
	case st.set == nil:
		return kafkaacl.Decision{Rule: RuleNotLoaded}
	case st.err != nil && a.cfg.MaxStale > 0 && a.now().Sub(st.loadedAt) > a.cfg.MaxStale:
		return kafkaacl.Decision{Rule: RuleStale}
	}
	return a.rules.Authorize(st.set, r)
}

// Load reads the ACLs from the source once, giving the read up (failed)
// after Config.RefreshInterval. On success they decide from now on; on
// failure the last ones read keep deciding (see Config.MaxStale) and the
// error, wrapped, is returned and reported in Status.
func (a *Authorizer) Load(ctx context.Context) error {
	prev := a.cur.Load()
	now := a.now()
	// A read that does not end is a failed one: given up after
	// RefreshInterval, so that the ACLs go stale at MaxStale rather than
	// deciding for as long as it hangs.
	rctx, cancel := context.WithTimeout(ctx, a.cfg.RefreshInterval)
	acls, from, err := a.src.ACLs(rctx)
	cancel()
	var set *kafkaacl.Set
	if err == nil {
		set, err = kafkaacl.NewSet(acls)
	}
	if err != nil {
		next := *prev
		next.triedAt, next.err, next.failures = now, fmt.Errorf("authz: read the ACLs: %w", err), prev.failures+1
		a.cur.Store(&next)
		a.m.refreshes.WithLabelValues("error").Inc()
		return next.err
	}
	a.cur.Store(&state{set: set, from: from, loadedAt: now, triedAt: now})
	a.m.refreshes.WithLabelValues("ok").Inc()
	if prev.err != nil || prev.set == nil || prev.set.Len() != set.Len() {
		a.log.Info("ACLs read", "acls", set.Len(), "from", from)
	}
	return nil
}

// Refresh asks Run to read the ACLs again now (SIGHUP for an ACL file).
func (a *Authorizer) Refresh() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Run reads the ACLs now and then every RefreshInterval, or at once after
// Refresh, until ctx ends; it returns nil then. A failed read is logged
// (the first of a run of failures at WARN, with its error, and again
// when the ACLs go stale) and tried again at the next interval.
func (a *Authorizer) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.RefreshInterval)
	defer t.Stop()
	for {
		if err := a.Load(ctx); err != nil && ctx.Err() == nil {
			st := a.cur.Load()
			switch {
			case st.failures == 1:
				a.log.Warn("cannot read the ACLs: the last ones read keep deciding", "err", err, "stale_after", a.cfg.MaxStale)
			case a.cfg.MaxStale > 0 && st.set != nil && a.now().Sub(st.loadedAt) > a.cfg.MaxStale &&
				st.triedAt.Sub(st.loadedAt)-a.cfg.RefreshInterval <= a.cfg.MaxStale:
				a.log.Error("the ACLs are stale: every request but a super user's is denied until they are read", "err", err,
					"last_read", st.loadedAt)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.kick:
		}
	}
}

// Status is what the Authorizer decides with, for tierd status and the
// status page.
type Status struct {
	// Loaded: ACLs have been read; ACLs is how many, From where from, and
	// LoadedAt when.
	Loaded   bool      `json:"loaded"`
	ACLs     int       `json:"acls"`
	From     string    `json:"from,omitempty"`
	LoadedAt time.Time `json:"loadedAt,omitzero"`
	// Error is the last read's error, "" when it succeeded; Failures how
	// many reads failed since the last success.
	Error    string `json:"error,omitempty"`
	Failures int    `json:"failures,omitempty"`
	// Stale: reads have failed for longer than MaxStale, and every
	// request but a super user's is denied.
	Stale bool `json:"stale"`
}

// Status returns what the Authorizer decides with now.
func (a *Authorizer) Status() Status {
	st := a.cur.Load()
	s := Status{Loaded: st.set != nil, ACLs: st.set.Len(), From: st.from, LoadedAt: st.loadedAt, Failures: st.failures}
	if st.err != nil {
		s.Error = st.err.Error()
		s.Stale = st.set != nil && a.cfg.MaxStale > 0 && a.now().Sub(st.loadedAt) > a.cfg.MaxStale
	}
	return s
}
