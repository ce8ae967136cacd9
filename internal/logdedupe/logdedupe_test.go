package logdedupe

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// clock is a settable time for the handler.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func lines(b *bytes.Buffer) []string     { return strings.Split(strings.TrimSpace(b.String()), "\n") }
func text(w *bytes.Buffer) slog.Handler {
	return slog.NewTextHandler(w, &slog.HandlerOptions{ReplaceAttr: dropTime})
}
func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func newLogger(t *testing.T, w *bytes.Buffer, c *clock) (*slog.Logger, *Handler) {
	t.Helper()
	h, err := New(text(w), Config{Window: time.Minute, MaxKinds: 8}, WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	return slog.New(h), h
}

// A loop logging one error 10,000 times within a window writes it once;
// the next one after the window carries the count.
func TestRepeatsWithinWindowWrittenOnce(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	log, _ := newLogger(t, &buf, c)
	for i := 0; i < 10000; i++ {
		log.Error("pebble: background error: write 00000" + string(rune('0'+i%10)) + ".sst: no space left on device")
		c.advance(time.Millisecond)
	}
	if got := lines(&buf); len(got) != 1 {
		t.Fatalf("within the window: %d lines, want 1:\n%s", len(got), buf.String())
	}
	c.advance(time.Minute)
	log.Error("pebble: background error: write 000011.sst: no space left on device")
	got := lines(&buf)
	if len(got) != 2 || !strings.Contains(got[1], "repeated=9999") || !strings.Contains(got[1], "000011.sst") {
		t.Fatalf("after the window: want the record with repeated=9999, got:\n%s", buf.String())
	}
}

func TestDistinctRecordsPass(t *testing.T) {
	cases := []struct {
		name string
		log  func(*slog.Logger)
	}{
		{"level", func(l *slog.Logger) { l.Warn("x", "err", "e") }},
		{"message", func(l *slog.Logger) { l.Error("y", "err", "e") }},
		{"attr value", func(l *slog.Logger) { l.Error("x", "err", "f") }},
		{"attr key", func(l *slog.Logger) { l.Error("x", "cause", "e") }},
		{"logger attrs", func(l *slog.Logger) { l.With("component", "rlmm").Error("x", "err", "e") }},
		{"group", func(l *slog.Logger) { l.WithGroup("g").Error("x", "err", "e") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, _ := newLogger(t, &buf, newClock())
			log.Error("x", "err", "e")
			tc.log(log)
			if got := lines(&buf); len(got) != 2 {
				t.Fatalf("%d lines, want 2:\n%s", len(got), buf.String())
			}
		})
	}
}

// A burst that stops is reported by the next record of another kind once
// its window has ended, and by Flush.
func TestSuppressedBurstReported(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	log, h := newLogger(t, &buf, c)
	for i := 0; i < 5; i++ {
		log.Warn("bucket not usable", "err", "dial tcp: connection refused")
	}
	c.advance(30 * time.Second)
	log.Info("something else")
	if got := lines(&buf); len(got) != 2 {
		t.Fatalf("inside the window: %d lines, want 2:\n%s", len(got), buf.String())
	}
	c.advance(31 * time.Second)
	log.Info("something else, later")
	got := lines(&buf)
	if len(got) != 4 || !strings.Contains(got[2], "bucket not usable") || !strings.Contains(got[2], "repeated=4") {
		t.Fatalf("want the burst's summary before the new record:\n%s", buf.String())
	}

	buf.Reset()
	log.Warn("again")
	log.Warn("again")
	log.Warn("again")
	if err := h.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := lines(&buf); len(got) != 2 || !strings.Contains(got[1], "repeated=2") {
		t.Fatalf("Flush: want the summary with repeated=2:\n%s", buf.String())
	}
}

// Levels below the next handler's are neither written nor remembered.
func TestEnabledFollowsNext(t *testing.T) {
	var buf bytes.Buffer
	h, err := New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(h)
	log.Info("hidden")
	log.Warn("shown")
	if h.Enabled(context.Background(), slog.LevelInfo) || !strings.Contains(buf.String(), "shown") || strings.Contains(buf.String(), "hidden") {
		t.Fatalf("got %q", buf.String())
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{}.Validate()
	if err == nil || !strings.Contains(err.Error(), "window") || !strings.Contains(err.Error(), "max kinds") {
		t.Fatalf("Validate() = %v, want both problems", err)
	}
}

// The same failure logged with an error attribute naming a new file number
// each time (Pebble's WAL, a probe file) is one kind; other attributes'
// numbers (a partition, an offset) still tell records apart.
func TestErrorAttrDigitsFolded(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	log, _ := newLogger(t, &buf, c)
	for i := 0; i < 100; i++ {
		err := &testErr{"write /m/" + strings.Repeat("0", 5) + string(rune('0'+i%10)) + ".log: no space left on device"}
		log.Error("metadata store stopped taking writes", "err", err)
		log.Warn("retrying", "error", "open /m/00000"+string(rune('0'+i%10))+".log: no space left on device")
		log.Info("copy failed", "cause", err)
		c.advance(time.Millisecond)
	}
	if got := lines(&buf); len(got) != 3 {
		t.Fatalf("%d lines, want one per kind:\n%s", len(got), buf.String())
	}
	buf.Reset()
	log.Info("copied", "partition", 1)
	log.Info("copied", "partition", 2)
	if got := lines(&buf); len(got) != 2 {
		t.Fatalf("numbers of other attributes folded:\n%s", buf.String())
	}
}

type testErr struct{ s string }

func (e *testErr) Error() string { return e.s }

// A record whose message starts with an exempt prefix is written every
// time; the summary Flush writes carries the flush time (so it never
// comes before lines written earlier) and the span of the repeats.
func TestExemptAndFlushStamp(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	h, err := New(slog.NewTextHandler(&buf, nil), Config{Window: time.Minute, MaxKinds: 8, ExemptPrefixes: []string{"config reload"}}, WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(h)
	log.Info("config reloaded", "applied", 0)
	log.Info("config reloaded", "applied", 0)
	for i := 0; i < 3; i++ {
		log.Error("store unreachable")
	}
	c.advance(10 * time.Minute)
	if err := h.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := lines(&buf)
	if len(got) != 4 || !strings.Contains(got[0], "config reloaded") || !strings.Contains(got[1], "config reloaded") {
		t.Fatalf("want both reload lines, the error once and its summary:\n%s", buf.String())
	}
	last := got[3]
	if !strings.Contains(last, "time="+c.t.Format("2006-01-02T15:04:05.000Z07:00")) || !strings.Contains(last, "repeated=2") ||
		!strings.Contains(last, `repeated_between="2026-01-01T00:00:00.000Z and `) {
		t.Fatalf("summary %q: want the flush time, repeated=2 and the span", last)
	}
}
