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
	size         int64 // bytes of the staged .log
	maxTimestamp int64 // -1 when no batch has one
	indexesOK    bool  // the local .index/.timeindex are usable as they are
	rebuilt      *index.Builder
}

// inspect scans a rolled segment's staged .log with CRC checks and checks
// its staged indexes (the very files that will be uploaded) against it. The log must hold whole, valid entries whose offsets
// lie in [base, end] and increase. An index is usable when it parses, every
// offset entry points at the start of a batch and names an offset after the
// previous batch's end, and every time entry's timestamp is at least the
// largest timestamp up to its offset's batch. Otherwise indexes rebuilt by
// Kafka's rule (index.Builder) are returned for upload instead.
func inspect(s localSegment, st *staged, intervalBytes int64) (inspection, error) {
	in := inspection{maxTimestamp: batch.NoTimestamp}
	logPath := st.log
	offs, offErr := readOffsets(st.offsetIdx, s.base)
	times, timeErr := readTimes(st.timeIdx, s.base)
	ok := offErr == nil && timeErr == nil
	f, err := os.Open(logPath)
	if err != nil {
		return in, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return in, err
	}
	in.size = info.Size()
	in.rebuilt = index.NewBuilder(s.base, intervalBytes)
	sc := batch.NewScanner(f, info.Size(), batch.ScanOptions{VerifyCRC: true, BufferSize: 1 << 20})
	prevLast := s.base - 1
	oi, ti := 0, 0
	for sc.Next() {
		b := sc.Batch()
		if !sc.CRCValid() {
			return in, fmt.Errorf("%w: %s: CRC mismatch in the batch at byte %d", errCorruptSegment, logPath, b.Position)
		}
		if b.LastOffset <= prevLast || b.LastOffset > s.end {
			return in, fmt.Errorf("%w: %s: batch at byte %d ends at offset %d, outside (%d, %d]", errCorruptSegment, logPath, b.Position, b.LastOffset, prevLast, s.end)
		}
		// Offset entries before this batch's position are off a boundary.
		for oi < len(offs) && int64(offs[oi].Position) <= b.Position {
			e := offs[oi]
			if int64(e.Position) != b.Position || e.Offset <= prevLast {
				ok = false
			}
			oi++
		}
		in.rebuilt.Add(b.LastOffset, b.MaxTimestamp, b.Position, b.Size)
		for ti < len(times) && times[ti].Offset <= b.LastOffset {
			if times[ti].Timestamp < in.rebuilt.MaxTimestamp {
				ok = false
			}
			ti++
		}
		prevLast = b.LastOffset
	}
	if err := sc.Err(); err != nil {
		return in, fmt.Errorf("%w: %v", errCorruptSegment, kafkalog.WithFile(err, logPath))
	}
	in.rebuilt.Seal()
	in.maxTimestamp = in.rebuilt.MaxTimestamp
	in.indexesOK = ok && oi == len(offs) && ti == len(times)
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
