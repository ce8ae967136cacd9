package grpcapi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
)

// invalidf is a request the edge refuses before it reaches the engine,
// of the engine's class remoteread.ErrInvalidArgument.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", remoteread.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// toStatus maps an error of the read engine's classes (package remoteread)
// to a gRPC status; this package, the gRPC edge, is the only place where
// that mapping happens.
//
//	ErrInvalidArgument       INVALID_ARGUMENT
//	ErrNotTiered             NOT_FOUND
//	*RangeError              OUT_OF_RANGE with an OffsetRange detail
//	ErrDataLoss (missing     DATA_LOSS (a finished copy must be readable)
//	object, corrupt copy,
//	object shorter than
//	its row says, offsets
//	no copy covers; a
//	damaged chunk, a
//	changed manifest)
//	a copy's KEK not listed  FAILED_PRECONDITION (the operator must list
//	or not opening it        it in objects.encryption.keys; not retryable)
//	context ended            DEADLINE_EXCEEDED / CANCELED
//	ErrStillLoading          UNAVAILABLE (the load goes on; retry)
//	anything else            UNAVAILABLE (object store or disk; retryable)
func toStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	var re *remoteread.RangeError
	switch {
	case errors.Is(err, remoteread.ErrInvalidArgument):
		return status.New(codes.InvalidArgument, err.Error())
	case errors.Is(err, remoteread.ErrNotTiered):
		return status.New(codes.NotFound, err.Error())
	case errors.As(err, &re):
		st := status.New(codes.OutOfRange, err.Error())
		if d, derr := st.WithDetails(&tierdpb.OffsetRange{LogStartOffset: re.LogStartOffset, HighestTieredOffset: re.HighestTieredOffset}); derr == nil {
			return d
		}
		return st
	case errors.Is(err, remoteread.ErrDataLoss), errors.Is(err, rsm.ErrNotFound), errors.Is(err, kafkalog.ErrCorrupt),
		errors.Is(err, chunked.ErrDamaged), errors.Is(err, chunked.ErrBadMAC), errors.Is(err, rsm.ErrBadManifest), errors.Is(err, rsm.ErrChecksum):
		return status.New(codes.DataLoss, err.Error())
	case errors.Is(err, chunked.ErrKeyUnavailable), errors.Is(err, chunked.ErrWrongKey):
		return status.New(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, err.Error())
	}
	return status.New(codes.Unavailable, err.Error())
}
