package chunked

import (
	"fmt"
	"io"
)

// Reader decodes a run of stored chunks, read from a stream of their
// bytes, into the original bytes [start, end) of an object: the body of
// one ranged GET of Layout.StoredRange. It holds one stored and one
// decoded chunk at a time.
type Reader struct {
	src    io.Reader
	c      *Codec
	l      *Layout
	s      *Sealer
	suffix string
	next   int   // next chunk to read
	last   int   // last chunk to read
	skip   int64 // original bytes to drop from the next chunk decoded
	left   int64 // original bytes still to return
	stored []byte
	plain  []byte // undelivered decoded bytes
	buf    []byte // plain's backing buffer
	err    error
}

// NewReader returns a Reader of the original bytes [start, end) of the
// object l describes, from src, the stored bytes of the chunks that
// StoredRange(start, end) names. s is the copy's Sealer (nil when it is
// not encrypted). Read errors: ErrDamaged (wrapped) for a chunk that is
// not what the index records; io.ErrUnexpectedEOF when src ends early;
// src's errors.
func NewReader(src io.Reader, c *Codec, l *Layout, s *Sealer, suffix string, start, end int64) *Reader {
	end = min(end, l.OriginalSize)
	r := &Reader{src: src, c: c, l: l, s: s, suffix: suffix}
	if start < 0 {
		r.err = fmt.Errorf("chunked: %s: negative start %d", suffix, start)
		return r
	}
	if start >= end {
		r.err = io.EOF
		return r
	}
	_, _, r.next, r.last = l.StoredRange(start, end)
	r.skip = start - int64(r.next)*l.ChunkBytes
	r.left = end - start
	return r
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	for len(r.plain) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.left == 0 || r.next > r.last {
			r.err = io.EOF
			return 0, io.EOF
		}
		if err := r.decodeNext(); err != nil {
			r.err = err
			return 0, err
		}
	}
	n := copy(p, r.plain)
	r.plain = r.plain[n:]
	return n, nil
}

func (r *Reader) decodeNext() error {
	i := r.next
	e := r.l.Chunks[i]
	if int64(cap(r.stored)) < e.StoredLen {
		r.stored = make([]byte, e.StoredLen)
	}
	r.stored = r.stored[:e.StoredLen]
	if _, err := io.ReadFull(r.src, r.stored); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("chunked: %s chunk %d: %w", r.suffix, i, err)
	}
	out, err := r.c.Decode(r.buf[:0], r.stored, e, r.s, r.suffix, i, r.l.OriginalLen(i))
	if err != nil {
		return err
	}
	r.buf = out
	out = out[r.skip:]
	r.skip = 0
	if int64(len(out)) > r.left {
		out = out[:r.left]
	}
	r.left -= int64(len(out))
	r.plain = out
	r.next++
	return nil
}

// WriteTo decodes straight into w, without the copy Read makes.
func (r *Reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(r.plain) > 0 {
			n, err := w.Write(r.plain)
			total += int64(n)
			r.plain = r.plain[n:]
			if err != nil {
				return total, err
			}
		}
		if r.err != nil || r.left == 0 || r.next > r.last {
			if r.err == io.EOF || r.err == nil {
				return total, nil
			}
			return total, r.err
		}
		if err := r.decodeNext(); err != nil {
			r.err = err
			return total, err
		}
	}
}
