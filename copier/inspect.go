package copier

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// errCorruptSegment marks a segment whose log fails its checks: it is not
// copied (so never deleted locally) and is reported.
var errCorruptSegment = errors.New("copier: corrupt segment")

// inspection is what a full scan of a rolled segment's .log tells.
type inspection struct {
	size         int64  // bytes to copy: the staged .log up to the end of its last batch
	fileSize     int64  // bytes of the staged .log; more than size when it ends in zeros
	maxTimestamp int64  // -1 when no batch has one
	indexesOK    bool   // the local .index/.timeindex are usable as they are
	indexProblem string // otherwise, the first check they failed
	rebuilt      *index.Builder
}

// inspect scans a rolled segment's staged .log with CRC checks and checks
// its staged indexes (the very files that will be uploaded) against it.
// The log must hold whole, valid entries that keep batch.Checker's rules
// (offsets that increase and lie in [base, end], and the others that no
// CRC covers) and whose uncompressed records match their headers
// (batch.Batch.CheckRecords); it may end in zero bytes after its last
// batch, as a preallocated segment does (log.preallocate=true): those are
// left out of the copy (size < fileSize). Non-zero bytes after the last
// whole batch make the segment corrupt. An index is usable when it parses, every
// offset entry points at the start of a batch and names an offset after the
// previous batch's end, and every time entry's timestamp is at least the
// largest timestamp up to its offset's batch. Otherwise indexes rebuilt by
// Kafka's rule (index.Builder) are returned for upload instead.
func inspect(s localSegment, st *staged, intervalBytes int64) (inspection, error) {
	in := inspection{maxTimestamp: batch.NoTimestamp}
	logPath := st.log
	// Errors name the segment's own file: the staged link's name holds a
	// new segment id each pass, and the same error pass after pass is
	// logged once (Run).
	name := s.path
	offs, offErr := readOffsets(st.offsetIdx, s.base)
	times, timeErr := readTimes(st.timeIdx, s.base)
	problem := "" // the first check the indexes failed
	fail := func(format string, args ...any) {
		if problem == "" {
			problem = fmt.Sprintf(format, args...)
		}
	}
	if offErr != nil {
		fail("offset index unreadable: %v", offErr)
	}
	if timeErr != nil {
		fail("time index unreadable: %v", timeErr)
	}
	f, err := os.Open(logPath)
	if err != nil {
		return in, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return in, err
	}
	in.fileSize = info.Size()
	in.rebuilt = index.NewBuilder(s.base, intervalBytes)
	sc := batch.NewScanner(f, info.Size(), batch.ScanOptions{VerifyCRC: true, BufferSize: 1 << 20})
	rules := batch.NewChecker(s.base, s.end)
	prevLast := s.base - 1
	oi, ti := 0, 0
	for sc.Next() {
		b := sc.Batch()
		if !sc.CRCValid() {
			return in, fmt.Errorf("%w: %w", errCorruptSegment, &kafkalog.CorruptionError{File: name, Position: b.Position, Reason: "CRC mismatch in the batch"})
		}
		err := rules.Check(b)
		if err == nil {
			err = sc.CheckRecords()
		}
		if errors.Is(err, kafkalog.ErrCorrupt) {
			return in, fmt.Errorf("%w: %w", errCorruptSegment, kafkalog.WithFile(err, name))
		} else if err != nil {
			return in, err
		}
		// Offset entries before this batch's position are off a boundary.
		for oi < len(offs) && int64(offs[oi].Position) <= b.Position {
			e := offs[oi]
			if int64(e.Position) != b.Position {
				fail("offset index entry %d (offset %d) points at byte %d, not at the start of a batch (the next batch starts at byte %d)",
					oi, e.Offset, e.Position, b.Position)
			} else if e.Offset <= prevLast {
				fail("offset index entry %d names offset %d, not after the previous batch's last offset %d", oi, e.Offset, prevLast)
			}
			oi++
		}
		in.rebuilt.Add(b.LastOffset, b.MaxTimestamp, b.Position, b.Size)
		for ti < len(times) && times[ti].Offset <= b.LastOffset {
			if times[ti].Timestamp < in.rebuilt.MaxTimestamp {
				fail("time index entry %d (offset %d) has timestamp %d, below the log's largest timestamp %d up to that offset",
					ti, times[ti].Offset, times[ti].Timestamp, in.rebuilt.MaxTimestamp)
			}
			ti++
		}
		prevLast = b.LastOffset
	}
	in.size = sc.ValidEnd()
	if err := sc.Err(); err != nil {
		if !errors.Is(err, kafkalog.ErrCorrupt) {
			return in, err
		}
		nonZero, zerr := batch.FirstNonZero(f, in.size, in.fileSize)
		if zerr != nil {
			return in, zerr
		}
		if nonZero >= 0 {
			return in, fmt.Errorf("%w: %w; the last whole batch ends at byte %d and the first non-zero byte after it is at byte %d",
				errCorruptSegment, kafkalog.WithFile(err, name), in.size, nonZero)
		}
	}
	in.rebuilt.Seal()
	in.maxTimestamp = in.rebuilt.MaxTimestamp
	if oi < len(offs) {
		fail("offset index has %d entries at or past byte %d, after the start of the log's last batch", len(offs)-oi, offs[oi].Position)
	}
	if ti < len(times) {
		fail("time index has %d entries for offsets past the log's last offset %d", len(times)-ti, prevLast)
	}
	in.indexesOK, in.indexProblem = problem == "", problem
	return in, nil
}

func readOffsets(p string, base int64) ([]index.OffsetEntry, error) {
	if p == "" {
		return nil, errors.New("no offset index")
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	e, err := index.ParseOffsetIndex(raw, base)
	if err != nil {
		return nil, err
	}
	if !sort.SliceIsSorted(e, func(i, j int) bool { return e[i].Position < e[j].Position }) {
		return nil, errors.New("offset index positions out of order")
	}
	return e, nil
}

func readTimes(p string, base int64) ([]index.TimeEntry, error) {
	if p == "" {
		return nil, errors.New("no time index")
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return index.ParseTimeIndex(raw, base)
}
