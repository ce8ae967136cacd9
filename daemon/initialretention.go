package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/internal/instance"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/saturate"
)

// CreatedFile, in the metadata dir, records when tierd run first used
// it, for copier.initial_retention_delay: on a new metadata dir (a first
// start, or one whose metadata dir was lost) retention deletes nothing
// for that long, so that what it would delete of old data is logged
// before anything goes. One JSON object (Created), written
// atomically (temporary file, fsync, rename, fsync of the dir).
const CreatedFile = "tierd-created.json"

// Created is the content of CreatedFile.
type Created struct {
	// CreatedMs is when tierd run found the metadata dir new (no
	// instance id in it yet), ms since the epoch.
	CreatedMs int64 `json:"createdMs"`
	// RetentionGoAheadMs is when an operator let retention go ahead
	// (tierd run --retention-go-ahead), ms since the epoch; 0: never.
	RetentionGoAheadMs int64 `json:"retentionGoAheadMs,omitempty"`
}

// MetadataCreated returns copier.Config.MetadataCreatedMs for a tierd
// run on the metadata dir dir: the recorded creation time; recorded now
// when the dir holds no instance id yet (a new metadata dir); 0 for a
// metadata dir older than the record, or once an operator let retention
// go ahead (goAhead records that, for good). Errors: a record that cannot
// be read or written.
func MetadataCreated(dir string, goAhead bool, now time.Time, log *slog.Logger) (int64, error) {
	p := filepath.Join(dir, CreatedFile)
	var info Created
	data, err := os.ReadFile(p)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &info); err != nil || info.CreatedMs <= 0 {
			return 0, fmt.Errorf("%s does not hold when this metadata dir was created (%q); fix it, or remove it to let retention delete at once", p, data)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("read %s: %w", p, err)
	default:
		if id, err := instance.Read(dir); err != nil || id != "" {
			return 0, nil // a metadata dir older than the record (a bad id file is refused when it is loaded)
		}
		info.CreatedMs = now.UnixMilli()
		if err := writeCreated(dir, info); err != nil {
			return 0, err
		}
	}
	if goAhead && info.RetentionGoAheadMs == 0 {
		info.RetentionGoAheadMs = now.UnixMilli()
		if err := writeCreated(dir, info); err != nil {
			return 0, err
		}
		log.Warn("retention goes ahead on this metadata dir (--retention-go-ahead): initial_retention_delay no longer applies", "file", p)
	}
	if info.RetentionGoAheadMs > 0 {
		return 0, nil
	}
	return info.CreatedMs, nil
}

func writeCreated(dir string, info Created) error {
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return kafkalog.WriteFileAtomic(filepath.Join(dir, CreatedFile), append(data, '\n'))
}

// NoteInitialRetention says at start when retention waits for
// initial_retention_delay, and how to let it go ahead, as a warning to
// log; nothing when it does not wait (any more) at now.
func NoteInitialRetention(cfg config.Config, now time.Time, log *slog.Logger) {
	created, delay := cfg.Copier.MetadataCreatedMs, cfg.Copier.InitialRetentionDelay
	if created <= 0 || delay <= 0 {
		return
	}
	until := saturate.Add(created, delay.Milliseconds())
	if now.UnixMilli() >= until {
		return
	}
	log.Warn("new metadata dir: retention deletes nothing until initial_retention_delay is over, and logs what it would delete meanwhile",
		"until", time.UnixMilli(until).UTC().Format(time.RFC3339), "initial_retention_delay", delay,
		"go_ahead", "tierd run --retention-go-ahead, or copier.initial_retention_delay: 0 (a reload applies it)")
}
