package fetch

import (
	"context"
	"fmt"
	"io"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
)

// segmentReader walks the entries of a remote .log from a byte position
// with ranged GETs of at least window bytes, never past the segment's size.
type segmentReader struct {
	ctx    context.Context
	rs     Remote
	meta   remotelog.SegmentMetadata
	window int64
	buf    []byte
	start  int64 // file position of buf[0]
	cur    int64 // file position of the next entry
	gets   int
}

func newSegmentReader(ctx context.Context, rs Remote, meta remotelog.SegmentMetadata, pos, window int64) *segmentReader {
	return &segmentReader{ctx: ctx, rs: rs, meta: meta, window: window, start: pos, cur: pos}
}

// ensure makes buf hold bytes [cur, cur+n), reading more when needed. It
// returns false when the segment ends first.
func (r *segmentReader) ensure(n int64) (bool, error) {
	end := r.start + int64(len(r.buf))
	if r.cur+n <= end {
		return true, nil
	}
	if r.cur+n > r.meta.SizeInBytes {
		return false, nil
	}
	// Drop consumed bytes, then read at least a window more.
	if r.cur > r.start {
		r.buf = append(r.buf[:0], r.buf[r.cur-r.start:]...)
		r.start = r.cur
		end = r.start + int64(len(r.buf))
	}
	want := max(r.cur+n-end, r.window)
	want = min(want, r.meta.SizeInBytes-end)
	rc, err := r.rs.FetchLogSegment(r.ctx, r.meta, end, end+want)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	r.gets++
	old := len(r.buf)
	r.buf = append(r.buf, make([]byte, want)...)
	if _, err := io.ReadFull(rc, r.buf[old:]); err != nil {
		r.buf = r.buf[:old]
		return false, fmt.Errorf("read %s bytes %d-%d: %w", r.meta.ID, end, end+want, err)
	}
	return true, nil
}

// next returns the next entry and its bytes (valid until the next call),
// or ok false at the end of the segment.
func (r *segmentReader) next() (b batch.Batch, raw []byte, ok bool, err error) {
	if r.cur >= r.meta.SizeInBytes {
		return b, nil, false, nil
	}
	if ok, err := r.ensure(batch.PrefixSize); err != nil || !ok {
		if err == nil {
			err = r.corrupt(r.cur, "truncated entry at the end of the segment")
		}
		return b, nil, false, err
	}
	size, _, err := batch.ParsePrefix(r.buf[r.cur-r.start:], r.cur)
	if err != nil {
		return b, nil, false, kafkalog.WithFile(err, r.meta.ID.String()+".log")
	}
	if ok, err := r.ensure(int64(size)); err != nil || !ok {
		if err == nil {
			err = r.corrupt(r.cur, fmt.Sprintf("entry of %d bytes runs past the segment end %d", size, r.meta.SizeInBytes))
		}
		return b, nil, false, err
	}
	raw = r.buf[r.cur-r.start : r.cur-r.start+int64(size)]
	if b, err = batch.ParseHeader(raw, r.cur); err != nil {
		return b, nil, false, kafkalog.WithFile(err, r.meta.ID.String()+".log")
	}
	r.cur += int64(size)
	return b, raw, true, nil
}

func (r *segmentReader) corrupt(pos int64, reason string) error {
	return &kafkalog.CorruptionError{File: r.meta.ID.String() + ".log", Position: pos, Reason: reason}
}

// readFrom returns whole entries of one segment starting with the entry
// whose last offset is >= offset, as the Fetch contract says, or nil when
// the segment has none (the offset is past its last batch).
func (r *segmentReader) readFrom(offset int64, maxBytes int64) (out []byte, next int64, err error) {
	for {
		b, raw, ok, err := r.next()
		if err != nil || !ok {
			return out, next, err
		}
		if len(out) == 0 {
			if b.LastOffset < offset {
				continue
			}
		} else if int64(len(out)+len(raw)) > maxBytes {
			return out, next, nil
		}
		out = append(out, raw...)
		next = b.LastOffset + 1
	}
}
