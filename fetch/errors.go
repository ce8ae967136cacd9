package fetch

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm"
)

var (
	errInvalid   = errors.New("invalid argument")
	errNotTiered = errors.New("nothing tiered for partition")
	errHole      = errors.New("offsets missing from the tiered log")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalid, fmt.Sprintf(format, args...))
}

// outOfRangeError carries the valid offset range to the client.
type outOfRangeError struct{ offset, logStart, highest int64 }

func (e *outOfRangeError) Error() string {
	return fmt.Sprintf("offset %d out of the tiered range [%d, %d]", e.offset, e.logStart, e.highest)
}

// missingCopyError says which finished copy a missing object belongs to.
type missingCopyError struct {
	meta remotelog.SegmentMetadata
	err  error
}

func (e *missingCopyError) Error() string {
	return fmt.Sprintf("copy %s of offsets %d-%d: %v", e.meta.ID, e.meta.StartOffset, e.meta.EndOffset, e.err)
}

func (e *missingCopyError) Unwrap() error { return e.err }

// toStatus maps an error to a gRPC status; this package is the only place
// where that mapping happens.
//
//	invalid argument         INVALID_ARGUMENT
//	nothing tiered           NOT_FOUND
//	offset out of range      OUT_OF_RANGE with an OffsetRange detail
//	missing object, corrupt  DATA_LOSS (a finished copy must be readable;
//	offsets no copy covers)
//	context ended            DEADLINE_EXCEEDED / CANCELED
//	remote.fetch.max.wait.ms UNAVAILABLE (the load goes on; retry)
//	passed, nothing arrived
//	anything else            UNAVAILABLE (object store or disk; retryable)
func toStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	var oor *outOfRangeError
	switch {
	case errors.Is(err, errInvalid):
		return status.New(codes.InvalidArgument, err.Error())
	case errors.Is(err, errNotTiered):
		return status.New(codes.NotFound, err.Error())
	case errors.As(err, &oor):
		st := status.New(codes.OutOfRange, err.Error())
		if d, derr := st.WithDetails(&tierdpb.OffsetRange{LogStartOffset: oor.logStart, HighestTieredOffset: oor.highest}); derr == nil {
			return d
		}
		return st
	case errors.Is(err, rsm.ErrNotFound), errors.Is(err, kafkalog.ErrCorrupt), errors.Is(err, errHole):
		return status.New(codes.DataLoss, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, err.Error())
	}
	return status.New(codes.Unavailable, err.Error())
}
