package fetch

import (
	"context"
	"fmt"

	"github.com/tierd/tierd/fetch/cache"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
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
}

// view returns file bytes [off, off+n), from the pinned range when it
// holds them.
func (r *segmentReader) view(ctx context.Context, off, n int64) ([]byte, error) {
	if r.pin != nil {
		return r.pin.View(ctx, off, n)
	}
	return r.c.View(ctx, r.obj, off, n)
}

func (s *Server) newSegmentReader(ctx context.Context, meta remotelog.SegmentMetadata, pos int64) *segmentReader {
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

// readFrom returns whole entries of one segment starting with the entry
// whose last offset is >= offset, as the Fetch contract says, or nil when
// the segment has none (the offset is past its last batch). The bytes
// [cur, touchEnd), where the answer most likely lies, load at once with
// one GET and stay pinned for this read. The first entry is waited for
// until wait ends (then ErrStillLoading); each later one is added only
// when all its bytes arrived before wait ended. end is the file position
// after the last entry returned (or scanned, when none is).
func (r *segmentReader) readFrom(ctx, wait context.Context, offset, maxBytes, touchEnd int64) (out []byte, next, end int64, err error) {
	r.pin = r.c.Pin(r.obj, r.cur, min(touchEnd, r.meta.SizeInBytes)-r.cur)
	r.ctx = wait
	start := int64(-1)
	end = r.cur
	ourWaitEnded := func() bool { return wait.Err() != nil && ctx.Err() == nil }
	stopped := func(err error) error { // nil: answer with what has arrived
		if !ourWaitEnded() {
			return err
		}
		if start < 0 {
			return fmt.Errorf("%w: %s at byte %d", ErrStillLoading, r.file(), r.cur)
		}
		return nil
	}
	for {
		b, ok, err := r.next()
		if err != nil {
			if err = stopped(err); err != nil {
				return nil, 0, 0, err
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
		// The entry goes in once its last byte (so all of it) is in.
		if _, err := r.view(wait, b.End()-1, 1); err != nil {
			if err = stopped(err); err != nil {
				return nil, 0, 0, err
			}
			break
		}
		if start < 0 {
			start = b.Position
		}
		end, next = b.End(), b.LastOffset+1
	}
	r.ctx = ctx
	if start < 0 {
		return nil, 0, end, nil
	}
	out, err = r.view(ctx, start, end-start)
	return out, next, end, err
}
