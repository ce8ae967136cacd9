package chunked

import (
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// Encoder turns an object's original bytes, read from a stream, into its
// stored chunks, as a stream: what an upload reads. It records the chunk
// index as it goes; Layout is valid once the stream has ended.
type Encoder struct {
	src      io.Reader
	c        *Codec
	s        *Sealer
	suffix   string
	chunk    []byte
	out      []byte // stored bytes not yet read
	outBuf   []byte
	chunks   []Chunk
	original int64
	sum      hash.Hash32 // CRC-32C of the original bytes
	outcomes [numOutcomes]int
	err      error
}

// NewEncoder returns an Encoder of src's bytes (object suffix of a copy
// whose Sealer is s, nil when not encrypted) in the Codec's chunk size.
func NewEncoder(src io.Reader, c *Codec, s *Sealer, suffix string) *Encoder {
	return &Encoder{src: src, c: c, s: s, suffix: suffix, chunk: make([]byte, c.cfg.ChunkBytes), sum: crc32.New(castagnoli)}
}

// Read implements io.Reader: the stored object's bytes. Errors: src's
// (io.EOF ends the object), the random source's.
func (e *Encoder) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		if e.err != nil {
			return 0, e.err
		}
		e.fill()
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

// fill reads and encodes the next chunk, or sets e.err.
func (e *Encoder) fill() {
	n, err := io.ReadFull(e.src, e.chunk)
	if n > 0 {
		e.sum.Write(e.chunk[:n])
		var c Chunk
		var o Outcome
		var eerr error
		e.outBuf, c, o, eerr = e.c.encode(e.outBuf[:0], e.chunk[:n], e.s, e.suffix, len(e.chunks))
		if eerr != nil {
			e.err = eerr
			return
		}
		e.outcomes[o]++
		e.out = e.outBuf
		e.chunks = append(e.chunks, c)
		e.original += int64(n)
	}
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		e.err = io.EOF // the last chunk, if any, is in e.out
	case err != nil:
		e.err = fmt.Errorf("chunked: read %s: %w", e.suffix, err)
	}
}

// Layout returns the object's chunked form once its stream has ended.
func (e *Encoder) Layout() (*Layout, error) {
	if e.err != io.EOF {
		return nil, fmt.Errorf("chunked: %s: layout asked before the end of the object", e.suffix)
	}
	return NewLayout(int64(e.c.cfg.ChunkBytes), e.original, e.chunks)
}

// Outcomes calls fn with each outcome of the chunks encoded so far and
// how many chunks had it (outcomes with none left out).
func (e *Encoder) Outcomes(fn func(o Outcome, chunks int)) {
	for o, n := range e.outcomes {
		if n > 0 {
			fn(Outcome(o), n)
		}
	}
}

// OriginalCRC32C is the CRC-32C of the original bytes read.
func (e *Encoder) OriginalCRC32C() uint32 { return e.sum.Sum32() }

// OriginalSize is the original bytes read so far.
func (e *Encoder) OriginalSize() int64 { return e.original }
