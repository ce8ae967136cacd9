package remoteread

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/remoteread/cache"
	"github.com/tierd/tierd/rsm"
)

// segmentReader walks the entries of a remote .log from a byte position,
// reading through the chunk cache.
type segmentReader struct {
	ctx  context.Context // bounds waits for data
	c    *cache.Cache
	obj  cache.Object
	meta remotelog.SegmentMetadata
	cur  int64 // file position of the next entry
	pin  *cache.Pin
	buf  []byte // the last view's bytes when there is no pin
	// cut is why readFrom's answer ended before max_bytes and the
	// segment's end ("max_wait", "load_failed"), "" when it did not;
	// cutErr is the failed load's error.
	cut    string
	cutErr error
}

// view returns file bytes [off, off+n), valid until the next view: from
// the pinned range (see cache.Pin.View), or without a pin a copy into
// the reader's buffer, so that no chunk's buffer escapes the cache's pool
// (the reader's callers only parse what they view).
func (r *segmentReader) view(ctx context.Context, off, n int64) ([]byte, error) {
	if r.pin != nil {
		return r.pin.View(ctx, off, n)
	}
	var err error
	r.buf, err = r.c.Read(ctx, r.obj, off, n, r.buf[:0])
	return r.buf, err
}

func (s *Engine) newSegmentReader(ctx context.Context, meta remotelog.SegmentMetadata, pos int64) *segmentReader {
	return &segmentReader{ctx: ctx, c: s.cache, obj: s.object(meta), meta: meta, cur: pos}
}

func (r *segmentReader) file() string { return r.meta.ID.String() + ".log" }

func (r *segmentReader) corrupt(pos int64, reason string) error {
	return &kafkalog.CorruptionError{File: r.file(), Position: pos, Reason: reason}
}

// next returns the header of the next entry and moves past it, or ok false
// at the end of the segment. The entry's bytes are not waited for.
func (r *segmentReader) next() (b batch.Batch, ok bool, err error) {
	size := r.meta.SizeInBytes
	if r.cur >= size {
		return b, false, nil
	}
	if r.cur+batch.PrefixSize > size {
		return b, false, r.corrupt(r.cur, "truncated entry at the end of the segment")
	}
	head, err := r.view(r.ctx, r.cur, min(batch.HeaderSize, size-r.cur))
	if err != nil {
		return b, false, err
	}
	n, magic, err := batch.ParsePrefix(head, r.cur)
	if err != nil {
		return b, false, kafkalog.WithFile(err, r.file())
	}
	if r.cur+int64(n) > size {
		return b, false, r.corrupt(r.cur, fmt.Sprintf("entry of %d bytes runs past the segment end %d", n, size))
	}
	if magic < 2 { // a legacy message's header is the whole message
		if head, err = r.view(r.ctx, r.cur, int64(n)); err != nil {
			return b, false, err
		}
	}
	if b, err = batch.ParseHeader(head, r.cur); err != nil {
		return b, false, kafkalog.WithFile(err, r.file())
	}
	r.cur += int64(n)
	return b, true, nil
}

// entry returns the bytes of an entry next returned.
func (r *segmentReader) entry(b batch.Batch) ([]byte, error) {
	return r.view(r.ctx, b.Position, int64(b.Size))
}

// emitFunc receives a read's runs of whole entries, in order: views of
// consecutive file bytes (one per chunk, see cache.Pin.Slices), which
// stay valid while h is held (a receiver keeping them past its return
// calls h.add, and h.done when done), and the offset after the run's last
// entry. It must not keep parts itself, which the reader reuses.
type emitFunc func(parts [][]byte, next int64, h *Hold) error

// readFrom reads whole entries of one segment starting with the entry
// whose last offset is >= offset, as the Fetch contract says, and passes
// them to emit: in one run at the end, or with stream set, in runs sent
// as their bytes arrive: the run so far is sent before waiting for bytes
// that have not arrived (so answers from the cache go in one run, whose
// size the client then knows at once). It passes nothing when
// the segment has no such entry (the offset is past its last batch). The
// bytes [cur, touchEnd), where the answer most likely lies, load at once
// with one GET and stay pinned, under the returned hold, which the caller
// releases once the views are no longer read (also on error). The first
// entry is waited for until wait ends (then ErrStillLoading); each later
// one is added only when all its bytes arrived before wait ended. n is
// the bytes passed, next the offset after the last entry passed, end the
// file position after it (or after the last entry scanned, when none is).
// A load failing after the first entry arrived ends the answer too, with
// the entries that arrived whole (r.cut says why an answer ended early).
// A unary read (stream unset) first waits, until wait ends, for the bytes
// up to waitTo (see upfrontEnd), all at once rather than entry by entry.
// A load the read makes takes up to ahead bytes past touchEnd along (a
// sequential reader's read-ahead, see cache.PinAhead; 0: the bytes asked).
func (r *segmentReader) readFrom(ctx, wait context.Context, offset, maxBytes, touchEnd, waitTo, ahead int64, stream bool, emit emitFunc) (h *Hold, n, next, end int64, err error) {
	pinEnd := min(touchEnd, r.meta.SizeInBytes)
	r.pin = r.c.PinAhead(r.obj, r.cur, pinEnd-r.cur, ahead)
	h = newHold(r.pin)
	r.ctx = wait
	defer func() { r.ctx = ctx }()
	start, sent := int64(-1), int64(-1) // first entry; end of the bytes emitted
	end = r.cur
	ourWaitEnded := func() bool { return wait.Err() != nil && ctx.Err() == nil }
	stopped := func(err error) error { // nil: answer with what has arrived
		if ourWaitEnded() {
			if start < 0 {
				return fmt.Errorf("%w: %s at byte %d", ErrStillLoading, r.file(), r.cur)
			}
			r.cut = "max_wait"
			return nil
		}
		if start >= 0 && loadFailed(ctx, err) {
			// Whole batches arrived before the load failed: they are an
			// answer (a fetch may return less than max_bytes); the next
			// fetch, from the offset after them, loads the rest again.
			r.cut, r.cutErr = "load_failed", err
			return nil
		}
		return err
	}
	var parts [][]byte
	if !stream {
		// A unary answer is sent whole: wait once for the bytes it
		// surely needs (upfrontEnd), not batch by batch as they arrive.
		// Bytes that do not come in time are dealt with by the loop
		// below, which answers with what has arrived.
		if l := min(waitTo, pinEnd) - r.cur; l > 0 && !r.pin.Arrived(r.cur, l) {
			parts, _ = r.pin.Slices(wait, r.cur, l, parts)
			parts = parts[:0]
		}
	}
	flush := func() error {
		if start < 0 || sent == end {
			return nil
		}
		var err error
		if parts, err = r.pin.Slices(ctx, sent, end-sent, parts[:0]); err != nil {
			return err
		}
		n += end - sent
		sent = end
		return emit(parts, next, h)
	}
	// flushBefore sends the run so far when bytes [off, off+l) are still
	// to arrive, so that its transport overlaps their GET.
	flushBefore := func(off, l int64) error {
		if !stream || start < 0 || sent == end || r.pin.Arrived(off, l) {
			return nil
		}
		return flush()
	}
	for {
		if err := flushBefore(r.cur, min(batch.HeaderSize, r.meta.SizeInBytes-r.cur)); err != nil {
			return h, n, next, end, err
		}
		b, ok, err := r.next()
		if err != nil {
			if err = stopped(err); err != nil {
				return h, n, next, end, err
			}
			break
		}
		if !ok {
			break
		}
		if start < 0 && b.LastOffset < offset {
			end = r.cur
			continue
		}
		if start >= 0 && b.End()-start > maxBytes {
			break
		}
		if err := flushBefore(b.Position, int64(b.Size)); err != nil {
			return h, n, next, end, err
		}
		// The entry goes in once its last byte (so all of it) is in.
		if _, err := r.view(wait, b.End()-1, 1); err != nil {
			if err = stopped(err); err != nil {
				return h, n, next, end, err
			}
			break
		}
		if start < 0 {
			start, sent = b.Position, b.Position
		}
		end, next = b.End(), b.LastOffset+1
	}
	return h, n, next, end, flush()
}

// loadFailed reports whether err, met reading on after the first
// entry of an answer, is a failed load (an object store or disk failure)
// rather than the caller's context ending, a corrupt copy, a missing
// object or one shorter than its row says (which stay errors: data loss
// is not hidden by a short answer).
func loadFailed(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && !errors.Is(err, kafkalog.ErrCorrupt) && !errors.Is(err, rsm.ErrNotFound) &&
		!errors.Is(err, cache.ErrShortObject)
}

// Hold counts the users of a read's pinned chunks: the read itself and
// each answer not yet written out (by the gRPC edge); the last one out
// releases the pin.
type Hold struct {
	n   atomic.Int32
	pin *cache.Pin
}

func newHold(p *cache.Pin) *Hold {
	h := &Hold{pin: p}
	h.n.Store(1)
	return h
}

// Add counts one more user.
func (h *Hold) Add() { h.n.Add(1) }

// Done ends one user; the last releases the pin.
func (h *Hold) Done() {
	if h.n.Add(-1) == 0 {
		h.pin.Release()
	}
}
