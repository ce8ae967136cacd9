package fetch

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierd/tierd/fetch/cache"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
)

// errStillLoading says the first batch of a fetch had not arrived from the
// object store within remote.fetch.max.wait.ms; its load goes on, so a
// retry is likely served from the cache.
var errStillLoading = errors.New("remote data still loading")

// segmentReader walks the entries of a remote .log from a byte position,
// reading through the chunk cache.
type segmentReader struct {
	ctx  context.Context // bounds waits for data
	c    *cache.Cache
	obj  cache.Object
	meta remotelog.SegmentMetadata
	cur  int64 // file position of the next entry
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
	head, err := r.c.View(r.ctx, r.obj, r.cur, min(batch.HeaderSize, size-r.cur))
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
		if head, err = r.c.View(r.ctx, r.obj, r.cur, int64(n)); err != nil {
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
	return r.c.View(r.ctx, r.obj, b.Position, int64(b.Size))
}

// readFrom returns whole entries of one segment starting with the entry
// whose last offset is >= offset, as the Fetch contract says, or nil when
// the segment has none (the offset is past its last batch). The loads of
// bytes [cur, touchEnd), where the answer most likely lies, start at once,
// in parallel, and are waited for together. The first entry is waited for until wait ends (then
// errStillLoading); entries after it are added while they arrive before
// wait ends. end is the file position after the last entry returned (or
// scanned, when none is).
func (r *segmentReader) readFrom(ctx, wait context.Context, offset, maxBytes, touchEnd int64) (out []byte, next, end int64, err error) {
	// Wait for the likely range at once (fewer wake-ups than entry by
	// entry); when wait ends first, the scan below takes what has come.
	_ = r.c.Wait(wait, r.obj, r.cur, min(touchEnd, r.meta.SizeInBytes)-r.cur)
	r.ctx = wait
	start := int64(-1)
	end = r.cur
	for {
		b, ok, err := r.next()
		if err != nil {
			if wait.Err() != nil && ctx.Err() == nil { // our wait ended, not the caller's
				if start >= 0 {
					break // answer with what has arrived
				}
				return nil, 0, 0, fmt.Errorf("%w: %s at byte %d", errStillLoading, r.file(), r.cur)
			}
			return nil, 0, 0, err
		}
		if !ok {
			break
		}
		if start < 0 {
			if b.LastOffset < offset {
				end = r.cur
				continue
			}
			start = b.Position
		} else if b.End()-start > maxBytes {
			break
		}
		end, next = b.End(), b.LastOffset+1
	}
	r.ctx = ctx
	if start < 0 {
		return nil, 0, end, nil
	}
	out, err = r.c.View(ctx, r.obj, start, end-start)
	return out, next, end, err
}
