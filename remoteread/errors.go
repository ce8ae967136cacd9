package remoteread

import (
	"errors"
	"fmt"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/remoteread/cache"
	"github.com/tierd/tierd/rsm"
)

// Error classes of the Go read API (ReadRemote and the other Remote*
// methods), returned wrapped; test them with errors.Is and errors.As. An
// error of none of these classes, and not ctx's, is an object store or disk
// failure: retryable.
var (
	// ErrInvalidArgument: an empty topic, or a negative partition, offset
	// or byte count.
	ErrInvalidArgument = errors.New("fetch: invalid argument")
	// ErrNotTiered: the partition has nothing tiered (no remote metadata,
	// or no finished copy and no highest tiered offset).
	ErrNotTiered = errors.New("fetch: nothing tiered for partition")
	// ErrStillLoading: the first batch of a read had not arrived from the
	// object store within remote.fetch.max.wait.ms. Its load goes on, so a
	// retry is likely served from the cache.
	ErrStillLoading = errors.New("fetch: remote data still loading")
	// ErrDataLoss: stored data that must exist is missing or corrupt: an
	// object of a finished copy is gone (rsm.ErrNotFound) or ends before
	// the bytes its row names (cache.ErrShortObject: a truncated object),
	// a copy fails its checks (kafkalog.ErrCorrupt), or offsets between the log start offset and the highest tiered
	// offset have no copy. The cause stays in the chain and the message.
	ErrDataLoss = errors.New("fetch: data loss")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// RangeError is a read outside the tiered range [LogStartOffset,
// HighestTieredOffset] of the partition's remote metadata.
type RangeError struct {
	Offset, LogStartOffset, HighestTieredOffset int64
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("fetch: offset %d out of the tiered range [%d, %d]", e.Offset, e.LogStartOffset, e.HighestTieredOffset)
}

// missingCopyError says which finished copy a missing or truncated object
// belongs to. It wraps rsm.ErrNotFound or cache.ErrShortObject.
type missingCopyError struct {
	meta remotelog.SegmentMetadata
	err  error
}

func (e *missingCopyError) Error() string {
	return fmt.Sprintf("copy %s of offsets %d-%d: %v", e.meta.ID, e.meta.StartOffset, e.meta.EndOffset, e.err)
}

func (e *missingCopyError) Unwrap() error { return e.err }

// missing marks err as a missing or truncated object of meta when it is
// one, so that the copy is reported for a check (see noteMissing).
func missing(meta remotelog.SegmentMetadata, err error) error {
	var mc *missingCopyError
	if (errors.Is(err, rsm.ErrNotFound) || errors.Is(err, cache.ErrShortObject)) && !errors.As(err, &mc) {
		return &missingCopyError{meta: meta, err: err}
	}
	return err
}

// classify returns err as the Go API returns it: a missing object (after
// the retries that tell a retention delete apart), a corrupt copy or a hole
// wrapped in ErrDataLoss; other errors as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrDataLoss) {
		return err
	}
	if errors.Is(err, rsm.ErrNotFound) || errors.Is(err, kafkalog.ErrCorrupt) || errors.Is(err, cache.ErrShortObject) {
		return fmt.Errorf("%w: %w", ErrDataLoss, err)
	}
	return err
}
