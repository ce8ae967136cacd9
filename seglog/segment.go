package seglog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// segment is one .log file with its two indexes. The log file stays open
// for reads for the segment's life; the index files are open for writing
// only while the segment is active.
type segment struct {
	dir  string
	base int64
	log  *os.File
	size int64 // committed bytes of the .log

	// idx holds the index entries and the max timestamp so far.
	idx *index.Builder

	// nextOffset is one past the last offset in the segment (base when empty).
	nextOffset int64
	// firstBatchTimestamp is the first batch's max timestamp (segment.ms).
	firstBatchTimestamp int64
	createdMs           int64

	// Active segments only.
	offIdx, timeIdx *os.File
	maxOffEntries   int
	maxTimeEntries  int
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, kafkalog.FileName(s.base, suffix))
}

// observe updates the segment's in-memory state for a batch appended at
// position pos and returns the index entries it adds, for the caller to
// persist.
func (s *segment) observe(b batch.Batch, pos int64) (off *index.OffsetEntry, tim *index.TimeEntry) {
	if pos == 0 {
		s.firstBatchTimestamp = b.MaxTimestamp
	}
	s.nextOffset = b.LastOffset + 1
	return s.idx.Add(b.LastOffset, b.MaxTimestamp, pos, b.Size)
}

func (s *segment) maxTimestamp() int64 { return s.idx.MaxTimestamp }

func (s *segment) offIndexFull() bool { return len(s.idx.Offsets) >= s.maxOffEntries }

// timeIndexFull keeps one slot free for the entry added when the segment
// rolls (TimeIndex.isFull).
func (s *segment) timeIndexFull() bool { return len(s.idx.Times) >= s.maxTimeEntries-1 }

// openIndexes opens (creating) both index files preallocated to
// indexBytes, rounded down to whole entries, and writes the in-memory
// entries into them. It makes the segment active.
func (s *segment) openIndexes(indexBytes int32) error {
	var err error
	s.maxOffEntries = int(indexBytes) / index.OffsetEntrySize
	s.maxTimeEntries = int(indexBytes) / index.TimeEntrySize
	if s.offIdx, err = preallocate(s.path(kafkalog.IndexSuffix), s.maxOffEntries*index.OffsetEntrySize); err != nil {
		return err
	}
	if s.timeIdx, err = preallocate(s.path(kafkalog.TimeIndexSuffix), s.maxTimeEntries*index.TimeEntrySize); err != nil {
		return err
	}
	buf, err := index.EncodeOffsets(s.base, s.idx.Offsets)
	if err != nil {
		return err
	}
	if _, err := s.offIdx.WriteAt(buf, 0); err != nil {
		return err
	}
	if buf, err = index.EncodeTimes(s.base, s.idx.Times); err != nil {
		return err
	}
	_, err = s.timeIdx.WriteAt(buf, 0)
	return err
}

// preallocate opens path for writing with the given size, zero filled.
func preallocate(path string, size int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// writeIndexEntries persists entries returned by observe.
func (s *segment) writeIndexEntries(off *index.OffsetEntry, tim *index.TimeEntry) error {
	if off != nil {
		buf, err := index.AppendOffsetEntry(nil, s.base, *off)
		if err != nil {
			return err
		}
		if _, err := s.offIdx.WriteAt(buf, int64(len(s.idx.Offsets)-1)*index.OffsetEntrySize); err != nil {
			return fmt.Errorf("write offset index: %w", err)
		}
	}
	if tim != nil {
		buf, err := index.AppendTimeEntry(nil, s.base, *tim)
		if err != nil {
			return err
		}
		if _, err := s.timeIdx.WriteAt(buf, int64(len(s.idx.Times)-1)*index.TimeEntrySize); err != nil {
			return fmt.Errorf("write time index: %w", err)
		}
	}
	return nil
}

// seal makes an active segment inactive, as a broker does on roll or clean
// shutdown: a final time index entry for the max timestamp, both indexes
// trimmed to their entries, and everything fsynced.
func (s *segment) seal() error {
	if s.offIdx == nil {
		return nil
	}
	if e := s.idx.Seal(); e != nil {
		if err := s.writeIndexEntries(nil, e); err != nil {
			return err
		}
	}
	var errs []error
	for _, t := range []struct {
		f    *os.File
		size int64
	}{
		{s.offIdx, int64(len(s.idx.Offsets)) * index.OffsetEntrySize},
		{s.timeIdx, int64(len(s.idx.Times)) * index.TimeEntrySize},
	} {
		if err := t.f.Truncate(t.size); err != nil {
			errs = append(errs, err)
		}
		if err := t.f.Sync(); err != nil {
			errs = append(errs, err)
		}
		if err := t.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.log.Sync(); err != nil {
		errs = append(errs, err)
	}
	s.offIdx, s.timeIdx = nil, nil
	return errors.Join(errs...)
}

// writeTrimmedIndexes replaces both index files of an inactive segment with
// exactly its in-memory entries, atomically.
func (s *segment) writeTrimmedIndexes() error {
	buf, err := index.EncodeOffsets(s.base, s.idx.Offsets)
	if err != nil {
		return err
	}
	if err := kafkalog.WriteFileAtomic(s.path(kafkalog.IndexSuffix), buf); err != nil {
		return err
	}
	if buf, err = index.EncodeTimes(s.base, s.idx.Times); err != nil {
		return err
	}
	return kafkalog.WriteFileAtomic(s.path(kafkalog.TimeIndexSuffix), buf)
}

func (s *segment) close() error {
	var errs []error
	if s.offIdx != nil {
		errs = append(errs, s.offIdx.Close(), s.timeIdx.Close())
	}
	errs = append(errs, s.log.Close())
	return errors.Join(errs...)
}
