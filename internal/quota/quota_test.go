package quota

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// measure reads n bytes through l from each of readers goroutines and
// returns the achieved rate, bytes per second over the whole run.
func measure(t *testing.T, l *Limiter, n int64, readers int) float64 {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			got, err := io.Copy(io.Discard, Reader(context.Background(), io.LimitReader(zeros{}, n), l))
			if err != nil || got != n {
				t.Errorf("copied %d of %d: %v", got, n, err)
			}
		})
	}
	wg.Wait()
	return float64(n) * float64(readers) / time.Since(start).Seconds()
}

// within checks an achieved rate against a limit: the burst lets it run a
// little over, sleeping on a loaded machine a little under.
func within(t *testing.T, what string, got float64, limit int64) {
	t.Helper()
	ratio := got / float64(limit)
	t.Logf("%s: %.0f bytes/s against a limit of %d: ratio %.3f", what, got, limit, ratio)
	// The limit's promise is the upper bound; a loaded machine may run
	// well under it (sleeps overshoot), so the lower side is loose: at
	// least half the limit, which a limiter that over-throttles misses.
	if ratio < 0.5 || ratio > 1.2 {
		t.Errorf("%s: achieved %.0f bytes/s, %.2fx the limit %d; want 0.5-1.2x", what, got, ratio, limit)
	}
}

// TestLimiterHoldsTheRate reads 12 MiB through a 4 MiB/s limit, alone and
// split over four readers: about three seconds each, and the rate over the
// run is the limit's.
func TestLimiterHoldsTheRate(t *testing.T) {
	const limit = 4 << 20
	within(t, "one reader", measure(t, New(limit), 12<<20, 1), limit)
	within(t, "four readers", measure(t, New(limit), 3<<20, 4), limit)
}

// TestSetRate raises a slow limit before reading: the new limit holds.
func TestSetRate(t *testing.T) {
	l := New(1 << 20)
	l.SetRate(8 << 20)
	if l.Rate() != 8<<20 {
		t.Fatalf("rate %d after SetRate(8 MiB)", l.Rate())
	}
	within(t, "after SetRate", measure(t, l, 16<<20, 1), 8<<20)
}

// TestUnlimited: no limit never waits.
func TestUnlimited(t *testing.T) {
	for _, r := range []int64{0, -1, Unlimited} {
		l := New(r)
		measure(t, l, 64<<20, 2)
		if l.Waited() != 0 || l.Rate() != 0 {
			t.Errorf("New(%d): waited %s, rate %d; want no wait", r, l.Waited(), l.Rate())
		}
	}
}

// TestBurstAndDebt follows the token accounting on a fake clock: the burst
// passes at once, more becomes debt that a later caller waits out, and a
// wait given up (context done) is not charged.
func TestBurstAndDebt(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(1 << 20) // burst 104857 bytes
	l.now = func() time.Time { return now }
	l.SetRate(1 << 20)
	l.mu.Lock()
	l.tokens = l.burst
	l.mu.Unlock()
	if err := l.Wait(context.Background(), int(Burst(1<<20))); err != nil || l.Waited() != 0 {
		t.Fatalf("a burst waited %s: %v", l.Waited(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, 10<<20); !errors.Is(err, context.Canceled) {
		t.Fatalf("a 10 s wait with a done context: %v", err)
	}
	l.mu.Lock()
	tokens := l.tokens
	l.mu.Unlock()
	if tokens != 0 {
		t.Fatalf("tokens %f after a wait given up; want 0 (not charged)", tokens)
	}
	now = now.Add(time.Second) // a second refills the burst, no more
	l.mu.Lock()
	l.refill()
	tokens = l.tokens
	l.mu.Unlock()
	if tokens != float64(Burst(1<<20)) {
		t.Fatalf("tokens %f after a second; want the burst %d", tokens, Burst(1<<20))
	}
}

// A debt too large for a time.Duration waits the longest duration, not a
// negative one that would let the bytes through at once: 1 byte per
// second owing 16 GiB is 544 years.
func TestHugeDebtDoesNotWrap(t *testing.T) {
	if d := debtWait(16<<30, 1); d <= 0 || d < time.Duration(1<<62) {
		t.Fatalf("16 GiB at 1 B/s: wait %v", d)
	}
	if d := debtWait(1<<20, 1<<20); d != time.Second {
		t.Fatalf("1 MiB at 1 MiB/s: wait %v, want 1s", d)
	}
	l := New(1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, 16<<30) }()
	select {
	case err := <-done:
		t.Fatalf("16 GiB at 1 B/s went through at once: %v", err)
	case <-time.After(50 * time.Millisecond): // still waiting, as it must
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
}
