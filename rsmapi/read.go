package rsmapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/lru"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
)

// rangeError is a start position past the end of the .log.
type rangeError struct{ start, size int64 }

func (e *rangeError) Error() string {
	return fmt.Sprintf("%v: start position %d past the end of the %d-byte .log", ErrRangeNotSatisfiable, e.start, e.size)
}

func (e *rangeError) Unwrap() error { return ErrRangeNotSatisfiable }

// byteRange is a read of a .log: n bytes from start; whole when the
// request had no Range.
type byteRange struct {
	start, n int64
	whole    bool
}

// parseRange reads a Range header against a .log of size bytes:
// "bytes=<start>-<end>" (both inclusive) or "bytes=<start>-" (to the
// end); none reads the whole. Errors: ErrInvalid for another form, an end
// before the start; *rangeError for a start past size.
func parseRange(h string, size int64) (byteRange, error) {
	if h == "" {
		return byteRange{n: size, whole: true}, nil
	}
	spec, ok := strings.CutPrefix(h, "bytes=")
	a, b, dash := strings.Cut(spec, "-")
	if !ok || !dash || strings.Contains(b, ",") {
		return byteRange{}, invalidf("Range %q: want bytes=<start>-<end> or bytes=<start>- (one range, positions inclusive)", h)
	}
	start, err := canonicalInt(a, math.MaxInt64)
	if err != nil {
		return byteRange{}, invalidf("Range %q: start position: %v", h, err)
	}
	last := int64(math.MaxInt64)
	if b != "" {
		if last, err = canonicalInt(b, math.MaxInt64); err != nil {
			return byteRange{}, invalidf("Range %q: end position: %v", h, err)
		}
		if last < start {
			return byteRange{}, invalidf("Range %q: the end position is before the start", h)
		}
	}
	if start > size {
		return byteRange{}, &rangeError{start: start, size: size}
	}
	return byteRange{start: start, n: min(last, size-1) - start + 1}, nil
}

// handleLog is GET C/log.
//
// Behavior:
//   - The copy's size comes from its row (COPY_SEGMENT_FINISHED), else
//     its manifest (tierd's metadata lost); neither: 404.
//   - 206 with the range's bytes and Content-Range; a start at the size:
//     206, empty, "bytes */<size>"; past it 416; no Range: 200, whole.
//   - Bytes come through tierd's chunk cache (LogReader). A failure before
//     the first byte is an error answer; after it, the connection is cut,
//     so the client sees a short body, never wrong bytes.
func (s *Server) handleLog(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	c, err := parseName(r)
	if err != nil {
		s.fail(w, opFetchLog, nil, err, began)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	defer boundWrites(ctx, w)()
	meta, err := s.lookup(ctx, c)
	if err != nil {
		s.fail(w, opFetchLog, &c.tp, fmt.Errorf("read of %s: %w", c, err), began)
		return
	}
	size := meta.SizeInBytes
	br, err := parseRange(r.Header.Get("Range"), size)
	if err != nil {
		var re *rangeError
		if errors.As(err, &re) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		}
		s.fail(w, opFetchLog, &c.tp, fmt.Errorf("read of %s: %w", c, err), began)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(br.n, 10))
	code := http.StatusPartialContent
	switch {
	case br.whole:
		code = http.StatusOK
	case br.n == 0:
		h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
	default:
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", br.start, br.start+br.n-1, size))
	}
	if br.n == 0 {
		w.WriteHeader(code)
		s.m.observe(opFetchLog, &c.tp, "OK", false, began)
		return
	}
	lw := &lazyWriter{w: w, code: code}
	n, err := s.rd.WriteLogRange(ctx, meta, br.start, br.n, lw)
	s.m.fetchBytes.WithLabelValues(s.m.partition(c.tp)...).Add(float64(n))
	if err == nil && n != br.n {
		err = fmt.Errorf("read %d of %d bytes", n, br.n)
	}
	if err != nil {
		err = fmt.Errorf("read of %s bytes %d-%d: %w", c, br.start, br.start+br.n-1, inStore(err))
		if !lw.started {
			s.fail(w, opFetchLog, &c.tp, err, began)
			return
		}
		// Headers and bytes are out: cut the connection, so that the
		// client sees a body shorter than its Content-Length.
		_, reason := classify(err)
		s.log.Warn("rsm: read failed mid-answer; connection cut", "err", err)
		s.noteError(err)
		s.m.observe(opFetchLog, &c.tp, reason, true, began)
		panic(http.ErrAbortHandler)
	}
	s.m.observe(opFetchLog, &c.tp, "OK", false, began)
}

// boundWrites makes the writes of an answer fail at ctx's deadline, so
// that a client that stops reading does not hold the request (and the
// object store's stream behind it) for ever: net/http's writes have no
// deadline of their own. The returned function, called when the handler
// is done, sends what is buffered and lifts the deadline for the next
// request on the connection; when that fails, the connection is not
// reused.
func boundWrites(ctx context.Context, w http.ResponseWriter) func() {
	rc := http.NewResponseController(w)
	if deadline, ok := ctx.Deadline(); ok {
		rc.SetWriteDeadline(deadline)
	}
	return func() {
		if rc.Flush() == nil {
			rc.SetWriteDeadline(time.Time{})
		}
	}
}

// lazyWriter sends the status with the first byte.
type lazyWriter struct {
	w       http.ResponseWriter
	code    int
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.w.WriteHeader(l.code)
	}
	return l.w.Write(p)
}

// indexTypes are Kafka's IndexType names.
var indexTypes = map[string]remotelog.IndexType{
	"OFFSET": remotelog.OffsetIndex, "TIMESTAMP": remotelog.TimeIndex, "TRANSACTION": remotelog.TransactionIndex,
	"PRODUCER_SNAPSHOT": remotelog.ProducerSnapshot, "LEADER_EPOCH": remotelog.LeaderEpochIndex,
}

// handleIndex is GET C/index/{type}.
//
// Behavior:
//   - type is one of Kafka's IndexType names (400 otherwise).
//   - 200 with the whole object; 404 when the copy has none (a segment
//     without a transaction index or producer snapshot: not counted as
//     an error), or no such copy.
func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	c, err := parseName(r)
	if err != nil {
		s.fail(w, opFetchIndex, nil, err, began)
		return
	}
	t, ok := indexTypes[r.PathValue("type")]
	if !ok {
		s.fail(w, opFetchIndex, &c.tp, invalidf("index type %q: want OFFSET, TIMESTAMP, TRANSACTION, PRODUCER_SNAPSHOT or LEADER_EPOCH", r.PathValue("type")), began)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	defer boundWrites(ctx, w)()
	meta, err := s.lookup(ctx, c)
	if err != nil {
		s.fail(w, opFetchIndex, &c.tp, fmt.Errorf("read of %s %s: %w", c, t, err), began)
		return
	}
	if (t == remotelog.TransactionIndex && !meta.TxnIndexPresent) || (t == remotelog.ProducerSnapshot && !meta.ProducerSnapshotPresent) {
		err := fmt.Errorf("%w: %s has no %s index", ErrNotFound, c, t)
		_, reason := answerError(w, err)
		s.m.observe(opFetchIndex, &c.tp, reason, false, began)
		return
	}
	data, err := s.st.FetchIndex(ctx, meta, t)
	if err != nil {
		s.fail(w, opFetchIndex, &c.tp, fmt.Errorf("read of %s %s: %w", c, t, inStore(err)), began)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data)
	s.m.observe(opFetchIndex, &c.tp, "OK", false, began)
}

// lookup returns the row a read of c uses: the catalogue's when it is
// COPY_SEGMENT_FINISHED; else, when tierd has no row (its metadata was
// lost, or the catalogue does not answer), the manifest's. Errors:
// ErrNotFound for a copy not finished, deleted, or without a manifest;
// the store's.
func (s *Server) lookup(ctx context.Context, c copyName) (remotelog.SegmentMetadata, error) {
	row, err := s.cat.BrokerCopy(c.tp, c.start, c.id)
	switch {
	case err == nil && row.State == remotelog.CopySegmentFinished:
		return row, nil
	case err == nil:
		return row, fmt.Errorf("%w: the copy is %s, not finished", ErrNotFound, row.State)
	case !errors.Is(err, rlmm.ErrSegmentNotFound):
		s.log.Debug("rsm: the catalogue did not answer; reading the copy's manifest", "copy", c.String(), "err", err)
	}
	if mf, ok := s.manifests.Get(c.id); ok && named(mf.Metadata(), c) {
		return mf.Metadata(), nil
	}
	mf, err := s.st.Manifest(ctx, c.meta())
	if errors.Is(err, rsm.ErrNotFound) {
		return remotelog.SegmentMetadata{}, fmt.Errorf("%w: no such copy (no row, no manifest)", ErrNotFound)
	}
	if err != nil {
		return remotelog.SegmentMetadata{}, inStore(err)
	}
	meta := mf.Metadata()
	if !named(meta, c) {
		return meta, fmt.Errorf("the manifest under %s describes %s segment %d copy %s", s.st.Key(c.meta(), rsm.ManifestSuffix),
			meta.TopicPartition, meta.StartOffset, meta.ID)
	}
	s.manifests.Put(c.id, mf)
	return meta, nil
}

// named reports whether meta is the copy c names: the same segment id in
// the same partition at the same start offset (the manifest cache holds
// manifests by segment id alone).
func named(meta remotelog.SegmentMetadata, c copyName) bool {
	return meta.ID == c.id && meta.TopicPartition == c.tp && meta.StartOffset == c.start
}

// manifestCacheSize is how many manifests lookup keeps.
const manifestCacheSize = 256

// manifestCache keeps the manifests of the copies read most recently.
type manifestCache = lru.Cache[remotelog.SegmentID, *rsm.Manifest]

func newManifestCache(n int) *manifestCache { return lru.New[remotelog.SegmentID, *rsm.Manifest](n) }
