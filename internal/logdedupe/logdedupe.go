// Package logdedupe is a slog.Handler that writes a repeated record once
// per window and then says how often it repeated, so that an error met in
// a loop (a full disk, an unreachable store) costs a line a minute rather
// than thousands a second.
//
// Two records are the same when their level, their message with every run
// of digits taken as one placeholder (Pebble writes file numbers into its
// messages), and all their attributes, those added by WithAttrs and
// WithGroup included, are equal, errors compared with their digits folded
// the same way; the time is not compared. The first record of a kind
// passes at once. Further ones within Config.Window of it
// are counted, not written. The next one after the window passes with the
// attribute repeated=N (the number suppressed since the last line written)
// and opens a new window; and when a window ends with suppressed records
// that nothing repeated since, the last of them is written with
// repeated=N and repeated_between="T1 and T2" by the next record the
// handler sees of any kind, or by Flush, stamped with the time it is
// written. Records whose message starts with one of
// Config.ExemptPrefixes are always written.
package logdedupe

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Config configures the handler.
type Config struct {
	// Window is how long a record suppresses its repeats. Default 1m.
	Window time.Duration
	// MaxKinds bounds the kinds of record remembered; beyond it the
	// kinds whose window ended are forgotten first, then the oldest.
	// Default 1024.
	MaxKinds int
	// ExemptPrefixes are message prefixes whose records are always
	// written (the outcome of an operator's action, which two alike
	// actions must both show). Default none.
	ExemptPrefixes []string
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{Window: time.Minute, MaxKinds: 1024} }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []string
	if c.Window <= 0 {
		errs = append(errs, fmt.Sprintf("window %s must be positive", c.Window))
	}
	if c.MaxKinds < 1 {
		errs = append(errs, fmt.Sprintf("max kinds %d must be at least 1", c.MaxKinds))
	}
	if len(errs) > 0 {
		return fmt.Errorf("logdedupe: %s", strings.Join(errs, "; "))
	}
	return nil
}

// RepeatedKey is the attribute that carries how many identical records
// were suppressed before this one.
const RepeatedKey = "repeated"

// Handler suppresses repeats; see the package comment. Handlers derived by
// WithAttrs and WithGroup share the memory of what was written.
type Handler struct {
	next  slog.Handler
	scope string // the attrs and groups added to this handler, encoded
	st    *state
}

// state is shared by a handler and every handler derived from it.
type state struct {
	cfg       Config
	now       func() time.Time
	mu        sync.Mutex
	kinds     map[string]*kind
	lastSweep time.Time
}

// kind is one remembered kind of record.
type kind struct {
	start      time.Time    // when the window opened: the last record written
	suppressed int          // records not written since
	last       slog.Record  // the last suppressed record
	next       slog.Handler // the handler it goes to
}

// Option sets an optional collaborator.
type Option func(*state)

// WithClock replaces time.Now (for tests).
func WithClock(now func() time.Time) Option { return func(s *state) { s.now = now } }

// New returns a handler that writes to next. Errors: cfg's.
func New(next slog.Handler, cfg Config, opts ...Option) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st := &state{cfg: cfg, now: time.Now, kinds: map[string]*kind{}}
	for _, o := range opts {
		o(st)
	}
	return &Handler{next: next, st: st}, nil
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.scope)
	for _, a := range as {
		writeAttr(&b, a)
	}
	return &Handler{next: h.next.WithAttrs(as), scope: b.String(), st: h.st}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), scope: h.scope + "[" + name + "]", st: h.st}
}

// Handle implements slog.Handler: it writes r, or counts it as a repeat.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	for _, p := range h.st.cfg.ExemptPrefixes {
		if strings.HasPrefix(r.Message, p) {
			return h.next.Handle(ctx, r)
		}
	}
	key := h.key(r)
	now := h.st.now()
	h.st.mu.Lock()
	due := h.st.sweepLocked(now, key)
	k, seen := h.st.kinds[key]
	write, repeated := true, 0
	switch {
	case !seen:
		h.st.rememberLocked(key, &kind{start: now, next: h.next})
	case now.Sub(k.start) < h.st.cfg.Window:
		k.suppressed++
		k.last = r.Clone()
		write = false
	default:
		repeated = k.suppressed
		k.start, k.suppressed, k.last = now, 0, slog.Record{}
	}
	h.st.mu.Unlock()
	var firstErr error
	for _, d := range due {
		if err := d.next.Handle(ctx, d.last); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if write {
		if repeated > 0 {
			r = r.Clone()
			r.AddAttrs(slog.Int(RepeatedKey, repeated))
		}
		if err := h.next.Handle(ctx, r); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// Flush writes, with repeated=N, the last suppressed record of every kind
// that has any, whatever its window; a program calls it before it exits.
func (h *Handler) Flush(ctx context.Context) error {
	now := h.st.now()
	h.st.mu.Lock()
	var due []*kind
	for _, k := range h.st.kinds {
		if k.suppressed > 0 {
			due = append(due, summary(k, now))
			k.suppressed, k.last = 0, slog.Record{}
		}
	}
	h.st.mu.Unlock()
	var firstErr error
	for _, d := range due {
		if err := d.next.Handle(ctx, d.last); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// RepeatedBetweenKey is the attribute of a summary written after its
// repeats (by a later record or Flush): "T1 and T2", the times of the
// record that opened the window and of the last repeat (RFC 3339, ms).
const RepeatedBetweenKey = "repeated_between"

// summary returns the record that reports k's suppressed repeats at now:
// its last one, stamped now (so the log stays in time order), with
// repeated=N and repeated_between="T1 and T2".
func summary(k *kind, now time.Time) *kind {
	r := slog.NewRecord(now, k.last.Level, k.last.Message, k.last.PC)
	k.last.Attrs(func(a slog.Attr) bool { r.AddAttrs(a); return true })
	const layout = "2006-01-02T15:04:05.000Z07:00"
	r.AddAttrs(slog.Int(RepeatedKey, k.suppressed),
		slog.String(RepeatedBetweenKey, k.start.Format(layout)+" and "+k.last.Time.Format(layout)))
	return &kind{last: r, next: k.next}
}

// sweepLocked returns the summaries of the kinds other than skip whose
// window ended with records suppressed, and forgets those kinds; it looks
// at most once per tenth of a window.
func (s *state) sweepLocked(now time.Time, skip string) []*kind {
	if now.Sub(s.lastSweep) < s.cfg.Window/10 {
		return nil
	}
	s.lastSweep = now
	var due []*kind
	for key, k := range s.kinds {
		if key == skip || now.Sub(k.start) < s.cfg.Window {
			continue
		}
		if k.suppressed > 0 {
			due = append(due, summary(k, now))
		}
		delete(s.kinds, key)
	}
	return due
}

// rememberLocked adds a kind, first forgetting the oldest one when
// MaxKinds are remembered. A forgotten kind's suppressed records are not
// reported: with MaxKinds kinds inside one window, the log is not a loop
// of one line.
func (s *state) rememberLocked(key string, k *kind) {
	if len(s.kinds) >= s.cfg.MaxKinds {
		var oldest string
		for key, c := range s.kinds {
			if oldest == "" || c.start.Before(s.kinds[oldest].start) {
				oldest = key
			}
		}
		delete(s.kinds, oldest)
	}
	s.kinds[key] = k
}

// key encodes what makes two records the same.
func (h *Handler) key(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteByte('|')
	foldDigits(&b, r.Message)
	b.WriteByte('|')
	b.WriteString(h.scope)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, a)
		return true
	})
	return b.String()
}

// foldDigits writes s with every run of digits as one '#'.
func foldDigits(b *strings.Builder, s string) {
	digits := false
	for _, c := range s {
		if c >= '0' && c <= '9' {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(c)
	}
}

// writeAttr encodes an attribute. The text of an error (an attribute whose
// value is an error, or whose key is err or error) has its runs of digits
// folded as the message's are: the same failure names a new file number
// (a WAL, a probe file) each time it happens.
func writeAttr(b *strings.Builder, a slog.Attr) {
	v := a.Value.Resolve()
	_, isErr := v.Any().(error)
	if v.Kind() == slog.KindAny && isErr || a.Key == "err" || a.Key == "error" {
		fmt.Fprintf(b, "%q=", a.Key)
		foldDigits(b, v.String())
		b.WriteByte(';')
		return
	}
	fmt.Fprintf(b, "%q=%q;", a.Key, v.String())
}
