// Package quota limits a byte rate with a token bucket, for Kafka's
// KIP-956 quotas on the bytes tierd copies to and fetches from remote
// storage (remote.log.manager.copy.max.bytes.per.second,
// remote.log.manager.fetch.max.bytes.per.second).
//
// A Limiter lets a burst of up to one tenth of a second's bytes through
// at once (at least 64 KiB), then holds the rate: a transfer of B bytes
// takes about (B - burst) / rate seconds. Bytes are charged after they
// were read, so one large read is paid for by waiting afterwards; a
// reader in debt waits, others queue behind its debt, and the rate over
// any few seconds stays at the limit. The limit can change at any time
// (SetRate), which a reload of tierd.yaml uses.
package quota

import (
	"context"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Unlimited is Kafka's default for both quotas (Long.MAX_VALUE): no limit.
const Unlimited = math.MaxInt64

// minBurst is the smallest burst, bytes: a few reads of a typical buffer.
const minBurst = 64 << 10

// maxRead caps one read through Reader, bytes, so a large buffer is
// charged in steps and the rate stays smooth.
const maxRead = 256 << 10

// Limiter is a token bucket over bytes. The zero value is not usable; use
// New. It is safe for concurrent use.
type Limiter struct {
	mu     sync.Mutex
	rate   float64 // bytes per second; 0: unlimited
	burst  float64 // bytes
	tokens float64 // may be negative: debt that waiters pay off
	last   time.Time
	now    func() time.Time

	waited atomic.Int64 // nanoseconds spent waiting, all callers
}

// New returns a limiter of bytesPerSecond; 0, a negative value or
// Unlimited means no limit.
func New(bytesPerSecond int64) *Limiter {
	l := &Limiter{now: time.Now}
	l.SetRate(bytesPerSecond)
	return l
}

// Burst returns the bytes a limit of bytesPerSecond lets through at once.
func Burst(bytesPerSecond int64) int64 {
	return max(bytesPerSecond/10, minBurst)
}

// SetRate changes the limit, bytes per second (0, negative or Unlimited:
// none), from now on. Debt already owed is kept.
func (l *Limiter) SetRate(bytesPerSecond int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill()
	if bytesPerSecond <= 0 || bytesPerSecond == Unlimited {
		l.rate, l.burst, l.tokens = 0, 0, 0
		return
	}
	if l.rate == 0 { // from no limit: start with a full burst
		l.tokens = float64(Burst(bytesPerSecond))
	}
	l.rate, l.burst = float64(bytesPerSecond), float64(Burst(bytesPerSecond))
	l.tokens = min(l.tokens, l.burst)
}

// Rate returns the limit, bytes per second; 0 when there is none.
func (l *Limiter) Rate() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.rate)
}

// refill adds the tokens earned since the last call. l.mu is held.
func (l *Limiter) refill() {
	now := l.now()
	if l.rate > 0 && !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
}

// Wait charges n bytes and returns once the limit allows them: at once
// within the burst, else after the debt is paid off at the rate. When ctx
// ends first, the bytes are not charged and ctx's error is returned.
func (l *Limiter) Wait(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	l.mu.Lock()
	if l.rate == 0 {
		l.mu.Unlock()
		return nil
	}
	l.refill()
	l.tokens -= float64(n)
	if l.tokens >= 0 {
		l.mu.Unlock()
		return nil
	}
	d := debtWait(-l.tokens, l.rate)
	l.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	start := time.Now()
	defer func() { l.waited.Add(int64(time.Since(start))) }()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		if l.rate > 0 {
			l.tokens = min(l.burst, l.tokens+float64(n))
		}
		l.mu.Unlock()
		return ctx.Err()
	}
}

// debtWait is how long paying off debt bytes takes at rate bytes per
// second, saturating at the longest time.Duration: a float too large for
// an int64 would convert to a negative duration and let the bytes through
// at once.
func debtWait(debt, rate float64) time.Duration {
	ns := debt / rate * float64(time.Second)
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// Waited returns the total time callers spent waiting, all of them
// counted (two waiting at once count twice).
func (l *Limiter) Waited() time.Duration { return time.Duration(l.waited.Load()) }

// Reader returns r with every byte read through it charged to l (nil l:
// r itself). A read waits after its bytes arrive; a wait cut short by ctx
// ends the read with ctx's error.
func Reader(ctx context.Context, r io.Reader, l *Limiter) io.Reader {
	if l == nil {
		return r
	}
	return &reader{ctx: ctx, r: r, l: l}
}

// ReadCloser is Reader for an io.ReadCloser; Close closes rc.
func ReadCloser(ctx context.Context, rc io.ReadCloser, l *Limiter) io.ReadCloser {
	if l == nil {
		return rc
	}
	return readCloser{Reader: Reader(ctx, rc, l), Closer: rc}
}

type readCloser struct {
	io.Reader
	io.Closer
}

type reader struct {
	ctx context.Context
	r   io.Reader
	l   *Limiter
}

func (r *reader) Read(p []byte) (int, error) {
	if len(p) > maxRead {
		p = p[:maxRead]
	}
	n, err := r.r.Read(p)
	if n > 0 {
		if werr := r.l.Wait(r.ctx, n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}
