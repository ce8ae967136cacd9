package rsmapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/segcheck"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
)

// Error classes, returned wrapped; the handlers map them to a status and
// a reason in one place (answerError, the package doc's table).
var (
	// ErrInvalid: a malformed path, query, header or body; bad offsets
	// or positions.
	ErrInvalid = errors.New("rsmapi: invalid request")
	// ErrUnauthenticated: no bearer token, or not the configured one.
	ErrUnauthenticated = errors.New("rsmapi: unauthenticated")
	// ErrPathNotAllowed: a file path outside rsm.log_dirs, or not the
	// segment's own file.
	ErrPathNotAllowed = errors.New("rsmapi: path not allowed")
	// ErrNotFound: no such copy, or no such object in the copy.
	ErrNotFound = errors.New("rsmapi: not found")
	// ErrTieredBySidecar: the topic is tiered by tierd's own copier.
	ErrTieredBySidecar = errors.New("rsmapi: topic tiered by tierd's copier")
	// ErrTooLarge: a body over its limit.
	ErrTooLarge = errors.New("rsmapi: body too large")
	// ErrRangeNotSatisfiable: a start position past the end of the .log.
	ErrRangeNotSatisfiable = errors.New("rsmapi: range not satisfiable")
	// ErrCorruptSegment: the segment's files fail tierd's checks; the
	// error names the file and the byte (a *kafkalog.CorruptionError in
	// the chain). It is segcheck's.
	ErrCorruptSegment = segcheck.ErrCorruptSegment
	// ErrTooManyCopies: rsm.max_concurrent_copies copies are running.
	ErrTooManyCopies = errors.New("rsmapi: too many copies")
	// ErrUnavailable: the object store or the metadata store does not
	// answer, or the endpoint is shutting down.
	ErrUnavailable = errors.New("rsmapi: unavailable")
	// ErrTimeout: the copy did not end within rsm.copy_timeout.
	ErrTimeout = errors.New("rsmapi: timeout")
	// ErrDataLoss: a stored copy's object is shorter than its row or
	// manifest says (truncated in the store): INTERNAL, not retried.
	ErrDataLoss = errors.New("rsmapi: stored data is damaged")
)

// reasons of the answers, as the package doc's table names them.
const (
	reasonInvalid     = "INVALID_ARGUMENT"
	reasonUnauth      = "UNAUTHENTICATED"
	reasonPath        = "PATH_NOT_ALLOWED"
	reasonNotFound    = "NOT_FOUND"
	reasonSidecar     = "TIERED_BY_SIDECAR"
	reasonTooLarge    = "TOO_LARGE"
	reasonRange       = "RANGE_NOT_SATISFIABLE"
	reasonCorrupt     = "CORRUPT_SEGMENT"
	reasonTooMany     = "TOO_MANY_COPIES"
	reasonInternal    = "INTERNAL"
	reasonUnavailable = "UNAVAILABLE"
	reasonTimeout     = "TIMEOUT"
)

// storeError marks an error of the object store (a Storage call): one
// that is not a missing object is UNAVAILABLE, so the plugin retries.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// inStore marks err (when not nil) as the object store's.
func inStore(err error) error {
	if err == nil {
		return nil
	}
	return &storeError{err: err}
}

// metaError marks an error of the metadata store (a Catalogue call): one
// that is not a missing row or an illegal transition is UNAVAILABLE.
type metaError struct{ err error }

func (e *metaError) Error() string { return e.err.Error() }
func (e *metaError) Unwrap() error { return e.err }

func inCatalogue(err error) error {
	if err == nil {
		return nil
	}
	return &metaError{err: err}
}

// classify returns the status and reason of err: the package doc's table.
// The order matters: a copy's deadline is a timeout whatever the store
// said when it struck, a missing object a 404 before a store error.
func classify(err error) (int, string) {
	var se *storeError
	var me *metaError
	var ne net.Error
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized, reasonUnauth
	case errors.Is(err, ErrTooLarge), errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, reasonTooLarge
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, reasonInvalid
	case errors.Is(err, ErrPathNotAllowed):
		return http.StatusForbidden, reasonPath
	case errors.Is(err, ErrTieredBySidecar):
		return http.StatusConflict, reasonSidecar
	case errors.Is(err, ErrRangeNotSatisfiable):
		return http.StatusRequestedRangeNotSatisfiable, reasonRange
	case errors.Is(err, ErrCorruptSegment), errors.Is(err, kafkalog.ErrCorrupt):
		return http.StatusUnprocessableEntity, reasonCorrupt
	case errors.Is(err, ErrTooManyCopies):
		return http.StatusTooManyRequests, reasonTooMany
	case errors.Is(err, ErrTimeout):
		return http.StatusGatewayTimeout, reasonTimeout
	case errors.Is(err, ErrDataLoss):
		return http.StatusInternalServerError, reasonInternal
	case errors.Is(err, ErrNotFound), errors.Is(err, rsm.ErrNotFound) && errors.As(err, &se), errors.Is(err, rlmm.ErrSegmentNotFound):
		return http.StatusNotFound, reasonNotFound
	case errors.Is(err, ErrUnavailable), errors.Is(err, rsm.ErrUnreachable), errors.Is(err, rlmm.ErrUnavailable),
		errors.Is(err, syscall.ENOSPC), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &se), errors.As(err, &me), errors.As(err, &ne):
		return http.StatusServiceUnavailable, reasonUnavailable
	}
	return http.StatusInternalServerError, reasonInternal
}

// errorBody is the JSON body of every answer that is not a success.
type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// answerError writes err's status and body: the only place errors
// become statuses.
func answerError(w http.ResponseWriter, err error) (int, string) {
	code, reason := classify(err)
	body, _ := json.Marshal(errorBody{Error: err.Error(), Reason: reason})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	if code == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="tierd-rsm"`)
	}
	w.WriteHeader(code)
	w.Write(append(body, '\n'))
	return code, reason
}

// invalidf returns an ErrInvalid error.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// fail answers a failed request and records it: logged (a server-side
// failure as a warning, a refused request at debug level), kept for the
// status, counted.
func (s *Server) fail(w http.ResponseWriter, op string, tp *remotelog.TopicPartition, err error, began time.Time) {
	code, reason := answerError(w, err)
	switch {
	case code >= 500:
		s.log.Warn("rsm: request failed", "op", op, "status", code, "reason", reason, "err", err)
		s.noteError(err)
	case code == http.StatusNotFound:
		s.log.Debug("rsm: not found", "op", op, "err", err)
	default:
		s.log.Info("rsm: request refused", "op", op, "status", code, "reason", reason, "err", err)
		if code == http.StatusUnprocessableEntity || code == http.StatusForbidden || code == http.StatusConflict {
			s.noteError(err)
		}
	}
	s.m.observe(op, tp, reason, true, began)
}

// writeJSON answers code with v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		answerError(w, fmt.Errorf("encode the answer: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(body, '\n'))
}
