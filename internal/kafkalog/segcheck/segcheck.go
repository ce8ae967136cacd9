// Package segcheck checks one rolled segment's files before they are
// copied to remote storage: the .log's record batches against their
// checksums and Kafka's header rules, and the .index and .timeindex
// against the log. It reads through handles and byte slices (no paths,
// no I/O of its own besides the io.ReaderAt it is given), so the bytes
// checked are the bytes a caller then uploads; tierd's copier calls it on
// its hard-linked staging files, the RSM endpoint on the broker's files
// opened once.
//
// # Rules
//
// The .log (Inspect) must hold whole, valid entries from byte 0:
//   - every entry's checksum holds: a v2 batch's CRC-32C over its bytes
//     from the attributes on, a legacy message's CRC-32 from its magic on
//     (Kafka's DefaultRecordBatch.isValid and LegacyRecord.isValid);
//   - every entry keeps the rules of the fields no checksum covers
//     (batch.Checker: offsets that increase and lie in [Base, End], a
//     magic of 0, 1 or 2, a partition leader epoch of -1 or more, no more
//     records than offsets; each rule's source in Kafka is given there);
//   - every entry's last offset is at most 2^31-1 past Base, so that the
//     indexes' 32-bit relative offsets can name it (Kafka's
//     LogSegment.ensureOffsetInRange; a segment that breaks it is split
//     when the broker loads it);
//   - the records of an uncompressed v2 batch match their header
//     (batch.Batch.CheckRecords: count, sizes, increasing offset deltas);
//   - after the last whole entry, only zero bytes may follow: the
//     preallocated tail of a segment written with log.preallocate=true
//     (Kafka's FileRecords.openChannel preallocates, and
//     LogSegment.onBecomeInactiveSegment trims it at roll, but a crash
//     can leave it). Those bytes are left out of the copy (Result.Size <
//     Result.FileSize); any non-zero byte there makes the segment
//     corrupt.
//
// The indexes are usable (Result.IndexesOK) when they parse (the real
// entries of a file that may end in the zero padding of a preallocated
// index, index.ParseOffsetIndex / index.ParseTimeIndex), the offset
// index's positions do not decrease, every offset entry points at the
// start of a batch and names an offset after the previous batch's last
// offset, no entry lies past the log's last batch, and every time entry's
// timestamp is at least the largest batch timestamp up to its offset
// (Kafka's OffsetIndex and TimeIndex sanity rules, and what
// LogSegment.append writes). Otherwise Result.Rebuilt holds indexes
// built from the log by the broker's own rule (index.Builder, after
// LogSegment.recover, with index.interval.bytes), which the caller
// uploads instead; Result.IndexProblem says which check failed first.
package segcheck

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// ErrCorruptSegment marks a segment whose .log fails a check: it is
// returned wrapped together with a *kafkalog.CorruptionError (so
// errors.Is(err, kafkalog.ErrCorrupt) holds too) that names the file
// (Input.Name) and the byte position of the first bad byte.
var ErrCorruptSegment = errors.New("segcheck: corrupt segment")

// scanBuffer is the read-ahead window of the log scan, bytes.
const scanBuffer = 1 << 20

// Input is one rolled segment's bytes, as its caller holds them.
type Input struct {
	// Name is the .log's name for errors (its path as the caller knows
	// it, e.g. the broker's path rather than a staging link's).
	Name string
	// Base is the segment's base offset; End its last possible offset,
	// inclusive (the next segment's base offset - 1), or -1 when nothing
	// bounds it.
	Base, End int64
	// Log reads the .log's bytes; LogSize is how many there are (bytes).
	// Required.
	Log     io.ReaderAt
	LogSize int64
	// OffsetIndex and TimeIndex are the bytes of the .index and
	// .timeindex files, preallocated zero padding included or not; nil
	// when the file is absent (an empty file is an empty, non-nil slice).
	OffsetIndex []byte
	TimeIndex   []byte
	// OffsetIndexErr and TimeIndexErr say why an index file could not be
	// read, if so; the index is then unusable with that reason
	// (Result.IndexProblem) and indexes are rebuilt.
	OffsetIndexErr, TimeIndexErr error
	// IndexIntervalBytes is index.interval.bytes (bytes between offset
	// index entries) for rebuilt indexes; Kafka's default is 4096.
	IndexIntervalBytes int64
}

// Result is what Inspect found.
type Result struct {
	// Size is the bytes to copy: the .log up to the end of its last
	// batch. FileSize is Input.LogSize; more than Size when the log ends
	// in zero bytes.
	Size, FileSize int64
	// MaxTimestamp is the largest batch max timestamp (ms), -1 when no
	// batch has one.
	MaxTimestamp int64
	// IndexesOK is true when the .index and .timeindex are usable as they
	// are; otherwise IndexProblem is the first check they failed.
	IndexesOK    bool
	IndexProblem string
	// Rebuilt holds the indexes built from the log by the broker's rule
	// (sealed; encode with Rebuilt.Encode(Base)), whether or not the
	// given ones are usable.
	Rebuilt *index.Builder
}

// Inspect scans the segment's .log with CRC checks and checks its
// indexes against it, by the rules of the package doc. Errors: a bad
// Input; ErrCorruptSegment (wrapped, with a *kafkalog.CorruptionError
// naming Input.Name and a byte position) for a .log that fails a check;
// Log's read errors as they are. An unusable index is not an error.
func Inspect(in Input) (Result, error) {
	res := Result{MaxTimestamp: batch.NoTimestamp, FileSize: in.LogSize}
	if in.Log == nil || in.LogSize < 0 {
		return res, fmt.Errorf("segcheck: %s: no log to read (%d bytes)", in.Name, in.LogSize)
	}
	if in.Base < 0 {
		return res, fmt.Errorf("segcheck: %s: base offset %d is negative", in.Name, in.Base)
	}
	if in.IndexIntervalBytes < 0 {
		return res, fmt.Errorf("segcheck: %s: index.interval.bytes %d is negative", in.Name, in.IndexIntervalBytes)
	}
	problem := "" // the first check the indexes failed
	fail := func(format string, args ...any) {
		if problem == "" {
			problem = fmt.Sprintf(format, args...)
		}
	}
	offs, err := offsetEntries(in)
	if err != nil {
		fail("offset index unreadable: %v", err)
	}
	times, err := timeEntries(in)
	if err != nil {
		fail("time index unreadable: %v", err)
	}
	res.Rebuilt = index.NewBuilder(in.Base, in.IndexIntervalBytes)
	sc := batch.NewScanner(in.Log, in.LogSize, batch.ScanOptions{VerifyCRC: true, BufferSize: scanBuffer})
	rules := batch.NewChecker(in.Base, in.End)
	prevLast := in.Base - 1
	oi, ti := 0, 0
	for sc.Next() {
		b := sc.Batch()
		if !sc.CRCValid() {
			return res, fmt.Errorf("%w: %w", ErrCorruptSegment, &kafkalog.CorruptionError{File: in.Name, Position: b.Position, Reason: "CRC mismatch in the batch"})
		}
		err := rules.Check(b)
		if err == nil && b.LastOffset-in.Base > math.MaxInt32 {
			err = kafkalog.Corruptf(b.Position, "%s ends at offset %d, more than %d past the segment's base offset %d: no index entry can name it "+
				"(Kafka's LogSegment refuses such an append, LogSegmentOffsetOverflowException, and splits a segment that holds one when it loads it)",
				batchKind(b), b.LastOffset, math.MaxInt32, in.Base)
		}
		if err == nil {
			err = sc.CheckRecords()
		}
		if errors.Is(err, kafkalog.ErrCorrupt) {
			return res, fmt.Errorf("%w: %w", ErrCorruptSegment, kafkalog.WithFile(err, in.Name))
		} else if err != nil {
			return res, err
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
		res.Rebuilt.Add(b.LastOffset, b.MaxTimestamp, b.Position, b.Size)
		for ti < len(times) && times[ti].Offset <= b.LastOffset {
			if times[ti].Timestamp < res.Rebuilt.MaxTimestamp {
				fail("time index entry %d (offset %d) has timestamp %d, below the log's largest timestamp %d up to that offset",
					ti, times[ti].Offset, times[ti].Timestamp, res.Rebuilt.MaxTimestamp)
			}
			ti++
		}
		prevLast = b.LastOffset
	}
	res.Size = sc.ValidEnd()
	if err := sc.Err(); err != nil {
		if !errors.Is(err, kafkalog.ErrCorrupt) {
			return res, err
		}
		nonZero, zerr := batch.FirstNonZero(in.Log, res.Size, res.FileSize)
		if zerr != nil {
			return res, zerr
		}
		if nonZero >= 0 {
			return res, fmt.Errorf("%w: %w; the last whole batch ends at byte %d and the first non-zero byte after it is at byte %d",
				ErrCorruptSegment, kafkalog.WithFile(err, in.Name), res.Size, nonZero)
		}
	}
	res.Rebuilt.Seal()
	res.MaxTimestamp = res.Rebuilt.MaxTimestamp
	if oi < len(offs) {
		fail("offset index has %d entries at or past byte %d, after the start of the log's last batch", len(offs)-oi, offs[oi].Position)
	}
	if ti < len(times) {
		fail("time index has %d entries for offsets past the log's last offset %d", len(times)-ti, prevLast)
	}
	res.IndexesOK, res.IndexProblem = problem == "", problem
	return res, nil
}

func batchKind(b batch.Batch) string {
	if b.Legacy() {
		return "message"
	}
	return "batch"
}

// offsetEntries parses the offset index and checks its positions are in
// order.
func offsetEntries(in Input) ([]index.OffsetEntry, error) {
	switch {
	case in.OffsetIndexErr != nil:
		return nil, in.OffsetIndexErr
	case in.OffsetIndex == nil:
		return nil, errors.New("no offset index")
	}
	e, err := index.ParseOffsetIndex(in.OffsetIndex, in.Base)
	if err != nil {
		return nil, err
	}
	if !sort.SliceIsSorted(e, func(i, j int) bool { return e[i].Position < e[j].Position }) {
		return nil, errors.New("offset index positions out of order")
	}
	return e, nil
}

// timeEntries parses the time index.
func timeEntries(in Input) ([]index.TimeEntry, error) {
	switch {
	case in.TimeIndexErr != nil:
		return nil, in.TimeIndexErr
	case in.TimeIndex == nil:
		return nil, errors.New("no time index")
	}
	return index.ParseTimeIndex(in.TimeIndex, in.Base)
}
