package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tierd/tierd/internal/instance"
	"github.com/tierd/tierd/internal/kafkalog"
)

// LogDirsFile, in the metadata dir, lists the log dirs (copier.log_dirs,
// as configured) in which tierd run last held its lock file
// (instance.LockFile). A log dir on that list whose lock file is gone is
// not the directory tierd tiered: most often the empty mount point of a
// disk that was unmounted before tierd started, where every partition
// would look remote_only and be offered to "tierd topics delete". One
// JSON object (logDirsRecord), written atomically.
const LogDirsFile = "tierd-log-dirs.json"

// logDirsRecord is the content of logDirsFile.
type logDirsRecord struct {
	// LogDirs held tierd's lock file when tierd run last started.
	LogDirs []string `json:"logDirs"`
}

// CheckRecordedLogDirs refuses to start on a log dir that held tierd's
// lock file at the last start and holds none now, unless accepted names
// it (tierd run --new-log-dir: the directory is new on purpose, its
// partitions gone or moved). A metadata dir without the record (a first
// start, or one of an older tierd) checks nothing. Errors name the dir
// and what to do; a record that cannot be read is an error too.
func CheckRecordedLogDirs(metadataDir string, logDirs, accepted []string) error {
	data, err := os.ReadFile(filepath.Join(metadataDir, LogDirsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the log dirs tierd last ran on: %w", err)
	}
	var rec logDirsRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return fmt.Errorf("%s: %w (fix it, or remove it: it only guards against log dirs replaced by an empty directory)", filepath.Join(metadataDir, LogDirsFile), err)
	}
	var lost []string
	for _, d := range logDirs {
		if !slices.Contains(rec.LogDirs, d) || slices.Contains(accepted, d) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(d, instance.LockFile)); errors.Is(err, fs.ErrNotExist) {
			lost = append(lost, d)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("copier: log_dirs %s held tierd's %s when tierd last ran and hold none now: not the log dir tierd tiered "+
		"(a disk not mounted, a directory replaced?); its partitions would look remote only. Mount it and start again, or, if it is new on purpose, "+
		"start with --new-log-dir %s", strings.Join(lost, ", "), instance.LockFile, strings.Join(lost, " --new-log-dir "))
}

// RecordLogDirs writes LogDirsFile: tierd run holds its lock file in
// every one of logDirs now. The error is the write's.
func RecordLogDirs(metadataDir string, logDirs []string) error {
	data, err := json.Marshal(logDirsRecord{LogDirs: logDirs})
	if err != nil {
		return err
	}
	return kafkalog.WriteFileAtomic(filepath.Join(metadataDir, LogDirsFile), append(data, '\n'))
}
