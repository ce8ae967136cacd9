package listener

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorCode maps a Log error to the Kafka error code a client gets; it is
// the only place that does (the table is in doc.go). fetchVersion is the
// Fetch request's version, or -1 for other APIs: Fetch v4-v5 get
// NOT_LEADER_OR_FOLLOWER instead of KAFKA_STORAGE_ERROR, which clients of
// those versions may not know to retry (Kafka's
// maybeDownConvertStorageError).
func errorCode(err error, fetchVersion int16) int16 {
	var oor *OffsetOutOfRangeError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUnknownPartition):
		return kerr.UnknownTopicOrPartition.Code
	case errors.As(err, &oor):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, ErrDataLoss):
		return kerr.UnknownServerError.Code
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The listener is stopping or the Log timed out: retriable.
		fallthrough
	default:
		// ErrUnavailable and I/O failures: retriable, as Kafka's
		// KafkaStorageException.
		if fetchVersion >= 0 && fetchVersion <= 5 {
			return kerr.NotLeaderForPartition.Code
		}
		return kerr.KafkaStorageError.Code
	}
}

// epochCode is Kafka's current-leader-epoch check (Partition
// checkCurrentLeaderEpoch): a request naming no epoch (-1) passes; an
// older one is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.
func epochCode(requested, current int32) int16 {
	switch {
	case requested < 0:
		return 0
	case current > requested:
		return kerr.FencedLeaderEpoch.Code
	case current < requested:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// countErrors counts each non-zero error code of a response.
func countErrors(m *metrics, api string, resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		m.countError(api, r.ErrorCode)
	case *kmsg.SASLHandshakeResponse:
		m.countError(api, r.ErrorCode)
	case *kmsg.SASLAuthenticateResponse:
		m.countError(api, r.ErrorCode)
	case *kmsg.MetadataResponse:
		for _, t := range r.Topics {
			m.countError(api, t.ErrorCode)
			for _, p := range t.Partitions {
				m.countError(api, p.ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				m.countError(api, p.ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		m.countError(api, r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				m.countError(api, p.ErrorCode)
			}
		}
	case *kmsg.OffsetForLeaderEpochResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				m.countError(api, p.ErrorCode)
			}
		}
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				m.countError(api, p.ErrorCode)
			}
		}
	}
}
