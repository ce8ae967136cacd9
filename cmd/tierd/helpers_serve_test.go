package main

import (
	"context"
	"log/slog"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
)

// serve runs tierd in process as "tierd run" does (daemon.Run), with
// log and, when given, its level.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, level ...*slog.LevelVar) error {
	o := daemon.Options{Log: log}
	if len(level) > 0 {
		o.Level = level[0]
	}
	return daemon.Run(ctx, cfg, o)
}
