package rsmapi

import (
	"errors"
	"io"

	"github.com/tierd/tierd/internal/kafkalog/index"
)

// Inspector checks one rolled segment's files as tierd's copier checks its
// own copies: segcheck.Inspect.
type Inspector func(InspectInput) (InspectResult, error)

// InspectInput is what a check reads: the segment's name (for errors),
// base and end offsets (inclusive), its .log through Log (LogSize bytes),
// its index files' bytes (or why they could not be read), and Kafka's
// index.interval.bytes for rebuilt indexes.
type InspectInput struct {
	Name                         string
	Base, End                    int64
	Log                          io.ReaderAt
	LogSize                      int64
	OffsetIndex, TimeIndex       []byte
	OffsetIndexErr, TimeIndexErr error
	IndexIntervalBytes           int64
}

// InspectResult is what a check found: the bytes to copy (Size; FileSize
// when the .log ends in a zero tail), the largest timestamp, whether the
// indexes are usable as they are (else the first problem, and indexes
// rebuilt from the log).
type InspectResult struct {
	Size, FileSize, MaxTimestamp int64
	IndexesOK                    bool
	IndexProblem                 string
	Rebuilt                      *index.Builder
}

// Inspect is the check the endpoint uses by default.
var Inspect Inspector = func(InspectInput) (InspectResult, error) {
	return InspectResult{}, errors.New("rsmapi: no segment check linked in")
}
