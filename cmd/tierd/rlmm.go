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
	b, err := daemon.OpenBucket(ctx, cfg.Bucket)
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

// rebuildMetadata rebuilds the metadata dir from the bucket into a new
// dir beside it ("<dir>.rebuild-<unix seconds>") and, once that is
// complete and closed, swaps it in with renames (the old dir kept as
// "<dir>.old-<unix seconds>"), then syncs the parent dir. A rebuild that
// fails leaves the metadata dir as it was and removes the new one; the
// error says so, or where things are when a step of the swap failed.
// The new dir keeps the old one's instance id: it is the same tierd; and
// its record of when it was created (daemon.CreatedFile), so that
// initial_retention_delay goes on as it was. A rebuild over a lost
// metadata dir (or one without an instance id) makes a new metadata dir,
// recorded as created now: the next tierd run waits out
// initial_retention_delay, as after any loss of the metadata dir.
func rebuildMetadata(ctx context.Context, cfg config.Config, all bool, stdout io.Writer) error {
	dir := cfg.Metadata.Dir
	_, err := os.Stat(dir)
	exists := err == nil
	id := ""
	var created []byte // the old dir's daemon.CreatedFile, nil when it had none
	if exists {
		// A running tierd holds Pebble's lock: check by opening first.
		if err := probeUnlocked(ctx, cfg); err != nil {
			return err
		}
		if id, err = instance.Read(dir); err != nil {
			return err
		}
		if created, err = os.ReadFile(filepath.Join(dir, daemon.CreatedFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	now := time.Now().Unix()
	build := fmt.Sprintf("%s.rebuild-%d", dir, now)
	if err := os.MkdirAll(filepath.Dir(build), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(build, 0o755); err != nil {
		return fmt.Errorf("nothing moved or rebuilt: %w", err)
	}
	nc := cfg
	nc.Metadata.Dir = build
	prev := ""
	if exists {
		prev = dir
	}
	if err := buildMetadata(ctx, nc, id, created, prev, all, stdout); err != nil {
		left := "removed"
		if rerr := os.RemoveAll(build); rerr != nil {
			left = fmt.Sprintf("left at %s (%v)", build, rerr)
		}
		return fmt.Errorf("%w; the metadata dir %s is as it was, the partial rebuild %s", err, dir, left)
	}
	old := ""
	if exists {
		old = fmt.Sprintf("%s.old-%d", dir, now)
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("the rebuilt metadata is complete at %s, the metadata dir %s is as it was: %w", build, dir, err)
		}
	}
	if err := os.Rename(build, dir); err != nil {
		if old != "" {
			if rerr := os.Rename(old, dir); rerr != nil {
				return fmt.Errorf("the rebuilt metadata is complete at %s, the old metadata at %s, and no metadata dir at %s: %w (moving the old back: %v)", build, old, dir, err, rerr)
			}
		}
		return fmt.Errorf("the rebuilt metadata is complete at %s, the metadata dir %s is as it was: %w", build, dir, err)
	}
	if err := kafkalog.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("the rebuilt metadata is at %s: sync its parent dir: %w", dir, err)
	}
	if old != "" {
		fmt.Fprintf(stdout, "moved the old metadata to %s\n", old)
	}
	return nil
}

// buildMetadata fills the new metadata dir of cfg from the bucket, with
// instance id id ("": none), created as daemon.CreatedFile (nil: a new
// dir) and the scheduled deletions and journal of the metadata dir prev
// ("": none). The store is closed when it returns.
func buildMetadata(ctx context.Context, cfg config.Config, id string, created []byte, prev string, all bool, stdout io.Writer) error {
	if id != "" {
		if err := instance.Write(cfg.Metadata.Dir, id); err != nil {
			return err
		}
	}
	if created != nil {
		if err := kafkalog.WriteFileAtomic(filepath.Join(cfg.Metadata.Dir, daemon.CreatedFile), created); err != nil {
			return err
		}
	} else if _, err := daemon.MetadataCreated(cfg.Metadata.Dir, false, time.Now(), slog.New(slog.DiscardHandler)); err != nil {
		return err // (it records only a dir without an instance id: a new one)
	}
	d, err := daemon.OpenParts(ctx, cfg, daemon.PartsOptions{}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		return err
	}
	defer d.Close()
	if prev != "" {
		// Scheduled deletions and the journal are not in the bucket: take
		// them from the old dir when it opens.
		if from, err := rlmm.Open(rlmm.Config{Dir: prev}); err != nil {
			fmt.Fprintf(stdout, "the old metadata does not open (%v): scheduled deletions and the deletion journal start afresh\n", err)
		} else {
			nd, ne, err := d.Store.CarryOver(from)
			from.Close()
			if err != nil {
				return fmt.Errorf("carry over scheduled deletions and the journal: %w", err)
			}
			fmt.Fprintf(stdout, "carried over %d scheduled deletion(s) and %d journal entries\n", nd, ne)
		}
	}
	var extra []remotelog.TopicPartition
	if all {
		if extra, err = d.Manager.Partitions(ctx); err != nil {
			return err
		}
	}
	n, err := d.Copier.Rebuild(ctx, extra)
	if err != nil {
		return err
	}
	parts, err := d.Store.Partitions()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %d segment rows for %d partition(s) from %s\n", n, len(parts), d.Bucket.Name())
	return nil
}

// probeUnlocked fails when a running tierd holds the metadata store. A
// store that does not open for another reason (damage: the reason to
// rebuild) passes.
func probeUnlocked(ctx context.Context, cfg config.Config) error {
	s, err := daemon.OpenStore(ctx, cfg)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
		return err
	}
	if err == nil {
		return s.Close()
	}
	return nil
}
