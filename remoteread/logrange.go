package remoteread

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/remoteread/cache"
)

// This file reads byte ranges of any copy's .log through the chunk cache:
// the RSM endpoint's reads for the broker's RemoteStorageManager plugin
// (package rsmapi), whose copies live under their own key prefix and are
// not in tierd's metadata rows, so ReadRemote's offset lookup does not
// apply.

// LogSource opens byte ranges [start, end) of a copy's .log (a ranged GET), as rsm.Manager.FetchLogSegment does.
type LogSource interface {
	FetchLogSegment(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error)
}

// ErrPastEnd: a WriteLogRange start position past the end of the copy's
// .log (HTTP 416 at the RSM endpoint).
var ErrPastEnd = errors.New("fetch: start position past the end of the .log")

// viewLeast is how many bytes WriteLogRange waits for before it writes
// what has arrived (fewer at a chunk's or the range's end): small enough
// that the answer flows as the GET body does, large enough that w is not
// written a few KiB at a time.
const viewLeast = 64 << 10

// WriteLogRange writes bytes [start, start+n) of the copy's .log (meta.SizeInBytes its size, meta.ID its name in the cache) to w as they arrive, read through the engine's chunk cache (one memory budget with everything else), and returns the bytes written.
//
// A range past the end of the .log is cut at the end (n may be anything
// up to math.MaxInt64 for "to the end"); a start equal to the size
// writes nothing. src opens the copy's ranged GETs (rsm.Manager.FetchLogSegment
// of the manager whose prefix holds the copy); bytes a cached chunk holds
// are not asked of it again, whichever source loaded them, so meta.ID
// must name these bytes and no others. Reads of one copy that continue
// where a recent read of it ended, or start a little before that end
// (within one chunk, as a broker's new stream starts at an offset index
// entry before where its previous one stopped), form one sequential
// reader, which from its third read on is read ahead within the copy, by
// at most an eighth of what it has read and remote.fetch.prefetch.max.bytes,
// never past the copy's end; other reads get no read-ahead. The range is
// read a chunk's worth at a time, each held (pinned) only while its bytes
// are written, so an answer of any length holds about one chunk. The
// GETs count in tierd_fetch_log_gets_total and
// tierd_fetch_log_bytes_total, the bytes written in
// tierd_fetch_served_bytes_total. The call is bounded by request_timeout.
//
// Errors (wrapped), after which the bytes written so far (the first
// result) are a prefix of the range: ErrInvalidArgument (a negative
// start, n or size); ErrPastEnd (start past the size); rsm.ErrNotFound
// for a missing object; cache.ErrShortObject for an object shorter than
// meta.SizeInBytes; ctx's errors (request_timeout's too); w's write
// error; ErrStoreUnreachable when a store failure comes while the store
// does not answer (WithStoreHealth); any other is an object store or
// disk failure (retryable).
func (s *Engine) WriteLogRange(ctx context.Context, src LogSource, meta remotelog.SegmentMetadata, start, n int64, w io.Writer) (int64, error) {
	size := meta.SizeInBytes
	switch {
	case start < 0 || n < 0 || size < 0:
		return 0, invalidf("start, n and the .log's size must be >= 0 (got %d, %d, %d)", start, n, size)
	case start > size:
		return 0, fmt.Errorf("%w: position %d of %s.log, %d bytes", ErrPastEnd, start, meta.ID, size)
	}
	end := size
	if n < size-start {
		end = start + n
	}
	if end == start {
		return 0, nil
	}
	if err := ctx.Err(); err != nil { // a chunk already cached would otherwise be served to a caller that gave up
		return 0, fmt.Errorf("fetch: %s.log: %w", meta.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.conf().RequestTimeout)
	defer cancel()
	obj := s.sourceObject(src, meta)
	st, prev := s.ranges.take(meta.ID, start, s.cache.ChunkBytes())
	ahead := s.demandAhead(st)
	if st == nil {
		st, prev = &readAhead{}, start
	} else {
		st.mu.Lock()
		st.hops++
		st.mu.Unlock()
	}
	var written int64
	defer func() {
		st.mu.Lock()
		st.taken += max(0, start+written-max(start, prev))
		hops := st.hops
		st.mu.Unlock()
		s.pm.served.Add(float64(written))
		if start+written >= size {
			st.mu.Lock()
			if st.reader != nil {
				s.cache.ReaderDone(st.reader) // its next read is of another copy
			}
			st.mu.Unlock()
		}
		s.ranges.ended(meta.ID, max(start+written, prev), st, hops)
	}()
	cb := s.cache.ChunkBytes()
	for pos := start; pos < end; {
		piece := min(end, pos+cb)
		k, err := s.writePiece(ctx, obj, pos, piece, ahead, w)
		written += k
		if err != nil {
			return written, err
		}
		pos = piece
		st.mu.Lock()
		st.taken += max(0, pos-max(start, prev)) // the window grows as the range is read
		prev = max(prev, pos)
		hops := st.hops
		st.mu.Unlock()
		if hops >= minHops {
			s.topUp(st, func(remotelog.SegmentMetadata) cache.Object { return obj }, meta, pos, nil, false)
			st.mu.Lock()
			ahead = s.window(st, hops)
			st.mu.Unlock()
		}
	}
	return written, nil
}

// writePiece writes bytes [from, to) of obj (at most a chunk's worth) to
// w as they arrive, holding their chunks until it returns; a load it
// makes takes ahead bytes of read-ahead along (see cache.PinAhead).
func (s *Engine) writePiece(ctx context.Context, obj cache.Object, from, to, ahead int64, w io.Writer) (int64, error) {
	pin := s.cache.PinAhead(obj, from, to-from, ahead)
	defer pin.Release()
	var written int64
	for off := from; off < to; {
		v, err := pin.ViewSome(ctx, off, to-off, viewLeast)
		if err != nil {
			return written, s.unreachable(fmt.Errorf("fetch: %s bytes %d-%d: %w", obj.Key, off, to, err))
		}
		k, err := w.Write(v)
		written += int64(k)
		if err != nil {
			return written, fmt.Errorf("fetch: write %s bytes %d-%d: %w", obj.Key, off, off+int64(len(v)), err)
		}
		if k < len(v) {
			return written, fmt.Errorf("fetch: write %s bytes %d-%d: %w", obj.Key, off, off+int64(len(v)), io.ErrShortWrite)
		}
		off += int64(k)
	}
	return written, nil
}

// sourceObject is a copy's .log read from src, as the cache reads it:
// named by meta.ID as tierd's own copies are (the ids are random, so a
// broker's copy and tierd's never share one), its GETs counted with the
// engine's and charged to the fetch quota.
func (s *Engine) sourceObject(src LogSource, meta remotelog.SegmentMetadata) cache.Object {
	return cache.Object{Key: meta.ID.String() + ".log", Size: meta.SizeInBytes,
		Open: func(ctx context.Context, start, end int64) (io.ReadCloser, error) {
			s.m.gets.Inc()
			s.m.bytes.Add(float64(end - start))
			rc, err := src.FetchLogSegment(ctx, meta, start, end)
			if err != nil {
				return nil, err
			}
			return s.throttled(ctx, rc), nil
		}}
}
