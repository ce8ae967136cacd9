package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/internal/instance"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
)

// runRlmm is "tierd rlmm rebuild": restore the remote log metadata from
// the manifests in the bucket, with tierd stopped.
func runRlmm(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if code, ok := verb(args, "rebuild", "tierd rlmm rebuild --config tierd.yaml [--all]", stderr); !ok {
		return code
	}
	var all bool
	cfg, code, ok := configCommand("rlmm rebuild", "tierd rlmm rebuild --config tierd.yaml [--all]", args[1:], stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&all, "all", false, "also adopt partitions found only in the bucket (not in this tierd's log dirs)")
	})
	if !ok {
		return code
	}
	// The rebuild reads the bucket: one that does not answer, or refuses
	// these credentials, fails it before the old metadata dir is moved.
	b, err := openBucket(ctx, cfg.Bucket)
	if err == nil {
		err = checkBucket(ctx, b, cfg.Bucket.Prefix)
		b.Close()
	}
	if err != nil {
		fmt.Fprintf(stderr, "tierd rlmm rebuild: nothing moved or rebuilt: %v\n", err)
		return 1
	}
	if err := rebuildMetadata(ctx, cfg, all, stdout); err != nil {
		fmt.Fprintf(stderr, "tierd rlmm rebuild: %v\n", err)
		return 1
	}
	return 0
}

// rebuildMetadata moves the metadata dir aside (keeping it as
// "<dir>.old-<unix seconds>") and rebuilds it from the bucket. The new dir
// keeps the old one's instance id: it is the same tierd; and its record of
// when it was created (daemon.CreatedFile), so that initial_retention_delay
// goes on as it was. A rebuild over a lost metadata dir (or one without
// an instance id) makes a new metadata dir, recorded as created now: the
// next tierd run waits out initial_retention_delay, as after any loss of
// the metadata dir.
func rebuildMetadata(ctx context.Context, cfg config.Config, all bool, stdout io.Writer) error {
	old := ""
	var created []byte // the old dir's daemon.CreatedFile, nil when it had none
	if _, err := os.Stat(cfg.Metadata.Dir); err == nil {
		old = fmt.Sprintf("%s.old-%d", cfg.Metadata.Dir, time.Now().Unix())
		// A running tierd holds Pebble's lock; renaming under it would be
		// wrong, so check by opening first.
		if err := probeUnlocked(ctx, cfg); err != nil {
			return err
		}
		id, err := instance.Read(cfg.Metadata.Dir)
		if err != nil {
			return err
		}
		if created, err = os.ReadFile(filepath.Join(cfg.Metadata.Dir, daemon.CreatedFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Rename(cfg.Metadata.Dir, old); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "moved the old metadata to %s\n", old)
		if id != "" {
			if err := instance.Write(cfg.Metadata.Dir, id); err != nil {
				return err
			}
		}
	}
	if created != nil {
		if err := os.MkdirAll(cfg.Metadata.Dir, 0o755); err != nil {
			return err
		}
		if err := kafkalog.WriteFileAtomic(filepath.Join(cfg.Metadata.Dir, daemon.CreatedFile), created); err != nil {
			return err
		}
	} else if _, err := daemon.MetadataCreated(cfg.Metadata.Dir, false, time.Now(), slog.New(slog.DiscardHandler)); err != nil {
		return err // (it records only a dir without an instance id: a new one)
	}
	d, err := newDaemon(ctx, cfg, startOptions{}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		return err
	}
	defer d.Close()
	if old != "" {
		// Scheduled deletions and the journal are not in the bucket: take
		// them from the old dir when it still opens.
		if prev, err := rlmm.Open(rlmm.Config{Dir: old}); err != nil {
			fmt.Fprintf(stdout, "the old metadata does not open (%v): scheduled deletions and the deletion journal start afresh\n", err)
		} else {
			nd, ne, err := d.store.CarryOver(prev)
			prev.Close()
			if err != nil {
				return fmt.Errorf("carry over scheduled deletions and the journal: %w", err)
			}
			fmt.Fprintf(stdout, "carried over %d scheduled deletion(s) and %d journal entries\n", nd, ne)
		}
	}
	var extra []remotelog.TopicPartition
	if all {
		if extra, err = d.mgr.Partitions(ctx); err != nil {
			return err
		}
	}
	n, err := d.copier.Rebuild(ctx, extra)
	if err != nil {
		return err
	}
	parts, err := d.store.Partitions()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %d segment rows for %d partition(s) from %s\n", n, len(parts), d.bucket.Name())
	return nil
}

// probeUnlocked fails when a running tierd holds the metadata store. A
// store that does not open for another reason (damage: the reason to
// rebuild) passes.
func probeUnlocked(ctx context.Context, cfg config.Config) error {
	s, err := openStore(ctx, cfg)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
		return err
	}
	if err == nil {
		return s.Close()
	}
	return nil
}
