package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tierd/tierd/internal/logdedupe"
)

// newLogger returns tierd's logger: text lines on w at level and above,
// each repeated record written once a minute with its count (package
// logdedupe), so that an error met in a loop never floods the log; the
// outcome of each config reload is always written. flush
// writes the counts still pending; call it before exiting.
func newLogger(w io.Writer, level slog.Leveler) (log *slog.Logger, flush func()) {
	cfg := logdedupe.DefaultConfig()
	cfg.ExemptPrefixes = []string{"config reload", "config change"} // each reload's outcome is logged, however alike
	h, err := logdedupe.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}), cfg)
	if err != nil {
		panic(err) // the defaults are valid
	}
	return slog.New(h), func() { h.Flush(context.Background()) }
}
