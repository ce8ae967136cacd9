package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// tierd's logger writes an error repeated in a loop once, and its count
// when flushed; other lines pass.
func TestLoggerDedupes(t *testing.T) {
	var buf bytes.Buffer
	log, flush := newLogger(&buf, slog.LevelInfo)
	rlmm := log.With("component", "rlmm")
	for i := 0; i < 1000; i++ {
		rlmm.Error("pebble: background error: write /m/00000" + string(rune('0'+i%10)) + ".sst: no space left on device")
	}
	log.Info("tierd stopped")
	flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "tierd stopped") || !strings.Contains(lines[2], "repeated=999") {
		t.Fatalf("want the error, the info line and the count:\n%s", buf.String())
	}
}
