package seglog

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// load opens every segment of the directory. Rolled segments keep their
// indexes when these are sane (trimming any untrimmed zero padding);
// otherwise the indexes are rebuilt from the log. The last segment is the
// active one: it is scanned in full, a torn or corrupt tail is cut off (the
// cut bytes are kept in "<log>.<position>.broken"), and its indexes are
// rebuilt.
func (l *Log) load() error {
	if err := l.recoverCleaning(); err != nil {
		return err
	}
	names, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []int64
	logs := map[int64]bool{}
	var indexFiles []kafkalog.SegmentFile
	for _, de := range names {
		name := de.Name()
		if strings.HasSuffix(name, ".tmp") {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return err
			}
			continue
		}
		f, ok := kafkalog.ParseFileName(name)
		if !ok {
			continue
		}
		if !f.Live {
			if f.Pending == kafkalog.DeletedSuffix { // a delete that did not finish
				if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
					return err
				}
			}
			continue
		}
		switch f.Suffix {
		case kafkalog.LogSuffix:
			bases = append(bases, f.BaseOffset)
			logs[f.BaseOffset] = true
		case kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix:
			indexFiles = append(indexFiles, f)
		}
	}
	for _, f := range indexFiles {
		if !logs[f.BaseOffset] { // an index without its log is useless
			if err := os.Remove(filepath.Join(l.dir, kafkalog.FileName(f.BaseOffset, f.Suffix))); err != nil {
				return err
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	for i, base := range bases {
		s, err := l.openSegment(base)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
		if i == len(bases)-1 {
			err = l.recoverActive(s)
		} else {
			err = l.loadRolled(s, bases[i+1])
		}
		if err != nil {
			return fmt.Errorf("load segment %s: %w", s.path(kafkalog.LogSuffix), err)
		}
	}
	return nil
}

// newSegmentState returns an empty segment's in-memory state.
func (l *Log) newSegmentState(base int64) *segment {
	return &segment{dir: l.dir, base: base, nextOffset: base, idx: index.NewBuilder(base, int64(l.cfg.IndexIntervalBytes)),
		firstBatchTimestamp: batch.NoTimestamp, createdMs: l.now().UnixMilli()}
}

func (l *Log) openSegment(base int64) (*segment, error) {
	s := l.newSegmentState(base)
	f, err := os.OpenFile(s.path(kafkalog.LogSuffix), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s.log, s.size = f, st.Size()
	return s, nil
}

// loadRolled reads a rolled segment's indexes, or rebuilds them.
func (l *Log) loadRolled(s *segment, nextBase int64) error {
	s.nextOffset = nextBase
	offFile, offReal, err1 := readIndex(s.path(kafkalog.IndexSuffix), func(b []byte) (int, error) {
		e, err := index.ParseOffsetIndex(b, s.base)
		s.idx.Offsets = e
		return len(e) * index.OffsetEntrySize, err
	})
	timeFile, timeReal, err2 := readIndex(s.path(kafkalog.TimeIndexSuffix), func(b []byte) (int, error) {
		e, err := index.ParseTimeIndex(b, s.base)
		s.idx.Times = e
		return len(e) * index.TimeEntrySize, err
	})
	offs, times := s.idx.Offsets, s.idx.Times
	sane := err1 == nil && err2 == nil
	if sane && len(offs) > 0 {
		last := offs[len(offs)-1]
		sane = int64(last.Position) < s.size && last.Offset < nextBase
	}
	if sane && len(times) > 0 {
		sane = times[len(times)-1].Offset < nextBase
	}
	if !sane {
		return l.rebuild(s, false)
	}
	if n := len(times); n > 0 {
		s.idx.MaxTimestamp, s.idx.OffsetOfMaxTimestamp = times[n-1].Timestamp, times[n-1].Offset
	}
	if offFile != offReal || timeFile != timeReal {
		return s.writeTrimmedIndexes() // untrimmed: a crash between roll and trim
	}
	return nil
}

// readIndex reads an index file and parses it; it returns the file size
// and the bytes the real entries take. A missing file is an error.
func readIndex(path string, parse func([]byte) (int, error)) (fileLen, realLen int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	n, err := parse(b)
	return int64(len(b)), int64(n), err
}

// rebuild regenerates a segment's in-memory state and indexes from its log.
// With truncate, the scan verifies every CRC and cuts the log at the first
// invalid entry; without, a bad entry stops the rebuild with an error.
func (l *Log) rebuild(s *segment, truncate bool) error {
	s.idx = index.NewBuilder(s.base, int64(l.cfg.IndexIntervalBytes))
	s.firstBatchTimestamp = batch.NoTimestamp
	rolledNext := s.nextOffset
	s.nextOffset = s.base
	sc := batch.NewScanner(s.log, s.size, batch.ScanOptions{VerifyCRC: truncate})
	var pos int64
	var bad error
	for sc.Next() {
		b := sc.Batch()
		switch {
		case truncate && !sc.CRCValid():
			bad = kafkalog.Corruptf(b.Position, "CRC mismatch")
		case b.LastOffset < s.nextOffset || (b.Magic == 2 && b.BaseOffset < s.nextOffset):
			bad = kafkalog.Corruptf(b.Position, "offsets go back: entry ends at %d, expected at least %d", b.LastOffset, s.nextOffset)
		case b.LastOffset-s.base > 1<<31-1:
			bad = kafkalog.Corruptf(b.Position, "offset %d too far past base offset %d", b.LastOffset, s.base)
		}
		if bad != nil {
			break
		}
		s.observe(b, pos)
		pos = sc.ValidEnd()
	}
	if bad == nil {
		bad = sc.Err()
	}
	if bad != nil && !truncate {
		return kafkalog.WithFile(bad, s.path(kafkalog.LogSuffix))
	}
	if bad != nil && pos < s.size {
		if err := l.cutTail(s, pos); err != nil {
			return err
		}
	}
	if !truncate {
		s.nextOffset = max(s.nextOffset, rolledNext)
		s.idx.Seal() // the entry a broker adds when the segment rolled
		return s.writeTrimmedIndexes()
	}
	return nil
}

// cutTail truncates a segment's log to pos, keeping the removed bytes in
// "<log>.<pos>.broken" for inspection.
func (l *Log) cutTail(s *segment, pos int64) error {
	logPath := s.path(kafkalog.LogSuffix)
	broken := fmt.Sprintf("%s.%d.broken", logPath, pos)
	out, err := os.Create(broken)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, io.NewSectionReader(s.log, pos, s.size-pos))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save tail of %s: %w", logPath, err)
	}
	if l.logger != nil {
		l.logger.Warn("truncated invalid tail of segment", "file", logPath, "position", pos, "bytes", s.size-pos, "saved", broken)
	}
	if err := s.log.Truncate(pos); err != nil {
		return err
	}
	if err := s.log.Sync(); err != nil {
		return err
	}
	s.size = pos
	return nil
}

// recoverActive scans the active segment, cuts an invalid tail and
// rebuilds its indexes, then opens them for appends.
func (l *Log) recoverActive(s *segment) error {
	if err := l.rebuild(s, true); err != nil {
		return err
	}
	return s.openIndexes(l.cfg.SegmentIndexBytes)
}
