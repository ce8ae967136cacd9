package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
)

// runRun is "tierd run": it parses the flags, checks the log dirs and
// runs the daemon (daemon.Run) until a stop.

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var goAhead bool
	var newDirs stringList
	cfg, code, ok := configCommand("run", "tierd run --config tierd.yaml [--retention-go-ahead] [--new-log-dir DIR ...]", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&goAhead, "retention-go-ahead", false, "let retention delete at once on a new metadata dir, without waiting for "+
			"copier.initial_retention_delay (recorded in the metadata dir: it holds for later starts too)")
		fs.Var(&newDirs, "new-log-dir", "a log dir of copier.log_dirs that tierd ran on before and that lost tierd's lock file on purpose "+
			"(a new disk, partitions moved away): start anyway (repeatable)")
	})
	if !ok {
		return code
	}
	if err := daemon.CheckLogDirs(cfg.Copier.LogDirs); err != nil {
		fmt.Fprintf(stderr, "tierd run: %v\n", err)
		return 1
	}
	if err := daemon.CheckRecordedLogDirs(cfg.Metadata.Dir, cfg.Copier.LogDirs, newDirs); err != nil {
		fmt.Fprintf(stderr, "tierd run: %v\n", err)
		return 1
	}
	level := new(slog.LevelVar) // a reload sets it
	l, _ := config.ParseLevel(cfg.LogLevel)
	level.Set(l)
	log, flush := newLogger(stderr, level)
	err := daemon.Run(ctx, cfg, daemon.Options{Log: log, Level: level, RetentionGoAhead: goAhead})
	flush() // held-back repeats before the last line, not after it
	return stopped(ctx, log, err)
}

// stopped logs how "tierd run" ended and returns its exit code: 0 when
// it ended without an error or because a stop was requested (SIGTERM,
// SIGINT) before it was serving, 1 otherwise.
func stopped(ctx context.Context, log *slog.Logger, err error) int {
	switch {
	case err == nil:
		log.Info("tierd stopped")
	case errors.As(err, new(*daemon.StopError)):
		var se *daemon.StopError
		errors.As(err, &se)
		log.Info("tierd stopped while opening the metadata store", "dir", se.Dir)
	case ctx.Err() != nil && errors.Is(err, context.Cause(ctx)):
		log.Info("tierd stopped before it was serving", "while", err.Error())
	default:
		log.Error("tierd stopped", "err", err)
		return 1
	}
	return 0
}
