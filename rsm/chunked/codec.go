package chunked

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// sealOverhead is what sealing adds to a chunk: the nonce and GCM's tag.
const sealOverhead = 12 + 16

// sampleBytes is how much of a chunk the heuristic tries first.
const sampleBytes = 64 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Codec encodes and decodes chunks. It is safe for concurrent use: one
// per process serves every copy.
type Codec struct {
	cfg    Config
	enc    *zstd.Encoder // cfg's level; nil without compression
	sample *zstd.Encoder // fastest, for the heuristic
	dec    *zstd.Decoder
}

// NewCodec returns a Codec for cfg (which must be valid). It can decode
// chunks of any level and flags, whatever cfg says.
func NewCodec(cfg Config) (*Codec, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Codec{cfg: cfg}
	var err error
	// Concurrency 1 and no content checksum: EncodeAll is called from the
	// copies' goroutines, and the chunk's CRC covers the frame.
	if cfg.Compression {
		if c.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevel(cfg.CompressionLevel)),
			zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true)); err != nil {
			return nil, err
		}
		if c.sample, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderCRC(false)); err != nil {
			return nil, err
		}
	}
	// DecodeAll decodes at most the room left in dst: Decode gives it
	// exactly the chunk's original size, so a crafted frame cannot expand
	// past it.
	if c.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.IgnoreChecksum(true),
		zstd.WithDecoderMaxMemory(uint64(MaxChunkBytes)+1<<20), zstd.WithDecodeAllCapLimit(true)); err != nil {
		return nil, err
	}
	return c, nil
}

// Config returns the settings new chunks follow.
func (c *Codec) Config() Config { return c.cfg }

// Sealer seals and opens the chunks of one copy under its chunk key.
type Sealer struct {
	aead   cipher.AEAD
	copyID string
}

// Encode returns stored chunk i of object suffix, appended to dst, and
// its index entry: compressed when the Codec compresses and it pays,
// sealed when s is not nil. Errors: only from the system's random source.
func (c *Codec) Encode(dst, chunk []byte, s *Sealer, suffix string, i int) ([]byte, Chunk, error) {
	dst, e, _, err := c.encode(dst, chunk, s, suffix, i)
	return dst, e, err
}

// Outcome is what compression made of one chunk.
type Outcome int

// Outcomes of Encode.
const (
	NotCompressing  Outcome = iota // compression is off
	Compressed                     // stored compressed
	SkippedBySample                // the heuristic's sample did not compress: stored as it came
	SkippedByNoGain                // compressed, saved less than 1/16: stored as it came
	numOutcomes
)

// String names the outcome as metrics label it.
func (o Outcome) String() string {
	return [...]string{"not_compressing", "compressed", "skipped_by_sample", "skipped_no_gain"}[o]
}

func (c *Codec) encode(dst, chunk []byte, s *Sealer, suffix string, i int) ([]byte, Chunk, Outcome, error) {
	var flags byte
	body := chunk
	outcome := NotCompressing
	if c.enc != nil {
		outcome = SkippedBySample
		if c.worthCompressing(chunk) {
			outcome = SkippedByNoGain
			z := c.enc.EncodeAll(chunk, getBuf(len(chunk)))
			if int64(len(z)) <= int64(len(chunk))-int64(len(chunk))/16 {
				body, flags, outcome = z, FlagCompressed, Compressed
				defer putBuf(z)
			} else {
				putBuf(z)
			}
		}
	}
	start := len(dst)
	if s != nil {
		flags |= FlagEncrypted
		var nonce [12]byte
		if _, err := rand.Read(nonce[:]); err != nil {
			return dst, Chunk{}, outcome, fmt.Errorf("chunked: nonce: %w", err)
		}
		dst = append(dst, nonce[:]...)
		dst = s.aead.Seal(dst, nonce[:], body, s.aad(suffix, i, flags))
	} else {
		dst = append(dst, body...)
	}
	stored := dst[start:]
	return dst, Chunk{StoredLen: int64(len(stored)), Flags: flags, CRC32C: crc32.Checksum(stored, castagnoli)}, outcome, nil
}

// worthCompressing is the heuristic (see the package doc): true when the
// heuristic is off, the chunk is no longer than the sample, or the
// sample saves at least 1/16 at the fastest level.
func (c *Codec) worthCompressing(chunk []byte) bool {
	if !c.cfg.Heuristic || len(chunk) <= sampleBytes {
		return true
	}
	z := c.sample.EncodeAll(chunk[:sampleBytes], getBuf(sampleBytes))
	ok := len(z) <= sampleBytes-sampleBytes/16
	putBuf(z)
	return ok
}

// Decode checks stored chunk i of object suffix against its index entry
// e, and returns its original bytes (want of them) appended to dst.
// Errors: ErrDamaged (wrapped) for a chunk whose CRC, size or seal is
// not the index's, or that does not decompress to want bytes; a sealed
// chunk with s nil (the caller has no key) is ErrDamaged too, as it
// cannot be read.
func (c *Codec) Decode(dst, stored []byte, e Chunk, s *Sealer, suffix string, i int, want int64) ([]byte, error) {
	if int64(len(stored)) != e.StoredLen || crc32.Checksum(stored, castagnoli) != e.CRC32C {
		return dst, fmt.Errorf("%w: %s chunk %d: %d bytes whose CRC-32C is not the index's", ErrDamaged, suffix, i, len(stored))
	}
	body := stored
	if e.Flags&FlagEncrypted != 0 {
		if s == nil {
			return dst, fmt.Errorf("%w: %s chunk %d is encrypted and no key was given", ErrDamaged, suffix, i)
		}
		if len(stored) < sealOverhead {
			return dst, fmt.Errorf("%w: %s chunk %d: %d bytes, shorter than a seal", ErrDamaged, suffix, i, len(stored))
		}
		if e.Flags&FlagCompressed == 0 {
			// Opened straight into dst: no copy of the plaintext.
			start := len(dst)
			out, err := s.aead.Open(dst, stored[:12], stored[12:], s.aad(suffix, i, e.Flags))
			if err != nil {
				return dst[:start], fmt.Errorf("%w: %s chunk %d does not open under the copy's key (changed, moved or from another copy)", ErrDamaged, suffix, i)
			}
			if got := int64(len(out) - start); got != want {
				return out[:start], fmt.Errorf("%w: %s chunk %d holds %d original bytes, not %d", ErrDamaged, suffix, i, got, want)
			}
			return out, nil
		}
		var err error
		buf := getBuf(len(stored))
		defer func() { putBuf(buf) }()
		if body, err = s.aead.Open(buf, stored[:12], stored[12:], s.aad(suffix, i, e.Flags)); err != nil {
			return dst, fmt.Errorf("%w: %s chunk %d does not open under the copy's key (changed, moved or from another copy)", ErrDamaged, suffix, i)
		}
		buf = body
	}
	start := len(dst)
	if e.Flags&FlagCompressed != 0 {
		var err error
		dst = slices.Grow(dst, int(want))
		if dst, err = c.dec.DecodeAll(body, dst[:start:start+int(want)]); err != nil {
			return dst[:start], fmt.Errorf("%w: %s chunk %d: zstd: %v", ErrDamaged, suffix, i, err)
		}
	} else {
		dst = append(dst, body...)
	}
	if got := int64(len(dst) - start); got != want {
		return dst[:start], fmt.Errorf("%w: %s chunk %d holds %d original bytes, not %d", ErrDamaged, suffix, i, got, want)
	}
	return dst, nil
}

// aad is the seal's additional data (see the package doc).
func (s *Sealer) aad(suffix string, i int, flags byte) []byte {
	b := make([]byte, 0, 32+len(s.copyID)+len(suffix))
	b = append(b, "tierd/chunk/v1\x00"...)
	b = append(b, s.copyID...)
	b = append(b, 0)
	b = append(b, suffix...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(i))
	return append(b, flags)
}

// bufClass is the step of the buffer sizes getBuf makes: buffers are
// recycled per size class, so that small ones (a compressed chunk's
// stored bytes, a sample) never stand in the way of chunk-sized ones.
const bufClass = 64 << 10

// bufPools[k] recycles buffers of k bufClass steps (*[]byte); larger ones
// than the largest chunk and its seal are not recycled.
var bufPools [(MaxChunkBytes+sealOverhead)/bufClass + 2]sync.Pool

// getBuf returns an empty buffer of at least n bytes' room: n rounded up
// to bufClass, recycled from that class when one was put back.
func getBuf(n int) []byte {
	k := (max(n, 1) + bufClass - 1) / bufClass
	if k < len(bufPools) {
		if b, ok := bufPools[k].Get().(*[]byte); ok {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, k*bufClass)
}

// putBuf gives b back to the class of its capacity; a buffer of another
// capacity (not getBuf's, or cut short by a three-index slice) is left
// to the collector.
func putBuf(b []byte) {
	c := cap(b)
	if k := c / bufClass; c > 0 && c%bufClass == 0 && k < len(bufPools) {
		b = b[:0]
		bufPools[k].Put(&b)
	}
}
