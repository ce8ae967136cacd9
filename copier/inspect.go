package copier

import (
	"os"

	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/kafkalog/segcheck"
)

// errCorruptSegment marks a segment whose log fails its checks: it is not
// copied (so never deleted locally) and is reported.
var errCorruptSegment = segcheck.ErrCorruptSegment

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
// its staged indexes (the very files that will be uploaded) against it,
// by package segcheck's rules: the log must hold whole, valid entries
// that keep batch.Checker's rules and whose uncompressed records match
// their headers, and may end in zero bytes (a preallocated segment),
// which are left out of the copy (size < fileSize); unusable indexes are
// replaced by ones rebuilt by Kafka's rule (index.Builder). Errors
// (errCorruptSegment among them) name the segment's own file: the staged
// link's name holds a new segment id each pass, and the same error pass
// after pass is logged once (Run).
func inspect(s localSegment, st *staged, intervalBytes int64) (inspection, error) {
	in := segcheck.Input{Name: s.path, Base: s.base, End: s.end, IndexIntervalBytes: intervalBytes}
	in.OffsetIndex, in.OffsetIndexErr = readIndex(st.offsetIdx)
	in.TimeIndex, in.TimeIndexErr = readIndex(st.timeIdx)
	f, err := os.Open(st.log)
	if err != nil {
		return inspection{maxTimestamp: -1}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return inspection{maxTimestamp: -1}, err
	}
	in.Log, in.LogSize = f, info.Size()
	res, err := segcheck.Inspect(in)
	return inspection{size: res.Size, fileSize: res.FileSize, maxTimestamp: res.MaxTimestamp,
		indexesOK: res.IndexesOK, indexProblem: res.IndexProblem, rebuilt: res.Rebuilt}, err
}

// readIndex reads a staged index file: nil bytes and no error when there
// is none (p is ""), its read error otherwise.
func readIndex(p string) ([]byte, error) {
	if p == "" {
		return nil, nil
	}
	return os.ReadFile(p)
}
