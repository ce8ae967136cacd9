package seglog

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// recoverCleaning settles an interrupted cleaning before the segments are
// loaded, as Kafka's LogLoader does (removeTempFilesAndCollectSwapFiles and
// the swap passes of load):
//
//   - every ".cleaned" file is removed: the swap had not started, the old
//     segments are whole;
//   - a ".swap" index without its "<base>.log.swap" is removed (the .log
//     is renamed last, so the swap had not started either);
//   - for each "<base>.log.swap", the live files of every segment whose
//     base offset lies in [base, end), end being one past the last offset
//     in the .swap log, are removed (they are the segments it replaces,
//     not yet renamed to .deleted), then its .swap files are renamed to
//     live names. Clean keeps the last batch of every cleaned segment, so
//     end is the end of the replaced range;
//   - ".deleted" files are removed by load as before.
func (l *Log) recoverCleaning() error {
	names, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	swapLogs := map[int64]bool{}
	var swapFiles []kafkalog.SegmentFile
	for _, de := range names {
		f, ok := kafkalog.ParseFileName(de.Name())
		switch {
		case !ok:
		case f.Pending == kafkalog.CleanedSuffix:
			if err := os.Remove(filepath.Join(l.dir, de.Name())); err != nil {
				return err
			}
		case f.Pending == kafkalog.SwapSuffix:
			swapFiles = append(swapFiles, f)
			if f.Suffix == kafkalog.LogSuffix {
				swapLogs[f.BaseOffset] = true
			}
		}
	}
	for _, f := range swapFiles {
		if !swapLogs[f.BaseOffset] {
			if err := os.Remove(filepath.Join(l.dir, kafkalog.FileName(f.BaseOffset, f.Suffix)+kafkalog.SwapSuffix)); err != nil {
				return err
			}
		}
	}
	for base := range swapLogs {
		if err := l.finishSwap(base, names); err != nil {
			return fmt.Errorf("finish interrupted cleaner swap of segment %d: %w", base, err)
		}
	}
	if len(swapLogs) > 0 || len(swapFiles) > 0 {
		return kafkalog.SyncDir(l.dir)
	}
	return nil
}

// finishSwap completes the swap of "<base>.log.swap".
func (l *Log) finishSwap(base int64, names []os.DirEntry) error {
	swapLog := filepath.Join(l.dir, kafkalog.FileName(base, kafkalog.LogSuffix)+kafkalog.SwapSuffix)
	end, err := nextOffsetOf(swapLog, base)
	if err != nil {
		return err
	}
	for _, de := range names {
		f, ok := kafkalog.ParseFileName(de.Name())
		if !ok || !f.Live || f.Suffix == kafkalog.SnapshotSuffix || f.BaseOffset < base || f.BaseOffset >= end {
			continue
		}
		if l.logger != nil {
			l.logger.Warn("removing segment file replaced by an interrupted cleaning", "file", de.Name(), "swap", swapLog)
		}
		if err := os.Remove(filepath.Join(l.dir, de.Name())); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	for _, sfx := range segmentSuffixes {
		live := filepath.Join(l.dir, kafkalog.FileName(base, sfx))
		if err := os.Rename(live+kafkalog.SwapSuffix, live); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// nextOffsetOf scans a segment log and returns one past its last offset
// (base+1 when it is empty, so that the segment at base is replaced). A
// .swap was fsynced before its rename, so a bad entry is corruption.
func nextOffsetOf(path string, base int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	next := base + 1
	sc := batch.NewScanner(f, st.Size(), batch.ScanOptions{})
	for sc.Next() {
		next = max(next, sc.Batch().LastOffset+1)
	}
	if err := sc.Err(); err != nil {
		return 0, kafkalog.WithFile(err, path)
	}
	return next, nil
}
