package chunked

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// Chunk flags (see the package doc's "Chunk index").
const (
	FlagCompressed byte = 0x01
	FlagEncrypted  byte = 0x02
	knownFlags          = FlagCompressed | FlagEncrypted
)

// ErrBadIndex marks (wrapped) a chunk index that cannot describe the
// object it is recorded for.
var ErrBadIndex = errors.New("chunked: bad chunk index")

// ErrDamaged marks (wrapped) a stored chunk whose bytes are not those
// the index records (CRC-32C or size), or that does not open under the
// copy's key, or does not decompress.
var ErrDamaged = errors.New("chunked: damaged chunk")

// Chunk is one entry of a chunk index.
type Chunk struct {
	StoredLen int64  // bytes of the stored chunk
	Flags     byte   // FlagCompressed, FlagEncrypted
	CRC32C    uint32 // of the stored chunk's bytes
}

// Layout is an object's chunked form: chunk size and original size
// (bytes), and its chunks in order, with their stored positions.
type Layout struct {
	ChunkBytes   int64
	OriginalSize int64
	Chunks       []Chunk
	offsets      []int64 // offsets[i]: stored position of chunk i; offsets[len(Chunks)]: stored size
}

// MaxOriginalSize bounds an object's original size in a chunk index: a
// Kafka segment's positions are 32-bit, so this is far above any.
const MaxOriginalSize = 1 << 40

// NewLayout checks chunks against the chunk and original sizes and
// returns their layout. Errors: ErrBadIndex (wrapped) when the chunk
// size is outside [MinChunkBytes, MaxChunkBytes], the original size
// outside [0, MaxOriginalSize], the count of chunks is not
// ceil(originalSize / chunkBytes), a chunk is stored in more bytes than
// its original bytes sealed, or has unknown flags. A layout read from a
// manifest is bounded as the writer's Config is, so a crafted one cannot
// make a reader allocate or index past what the object holds.
func NewLayout(chunkBytes, originalSize int64, chunks []Chunk) (*Layout, error) {
	if chunkBytes < MinChunkBytes || chunkBytes > MaxChunkBytes || originalSize < 0 || originalSize > MaxOriginalSize {
		return nil, fmt.Errorf("%w: chunk size %d, original size %d", ErrBadIndex, chunkBytes, originalSize)
	}
	want := originalSize / chunkBytes
	if originalSize%chunkBytes != 0 {
		want++
	}
	if int64(len(chunks)) != want {
		return nil, fmt.Errorf("%w: %d chunks for %d bytes in chunks of %d (want %d)", ErrBadIndex, len(chunks), originalSize, chunkBytes, want)
	}
	l := &Layout{ChunkBytes: chunkBytes, OriginalSize: originalSize, Chunks: chunks, offsets: make([]int64, len(chunks)+1)}
	for i, c := range chunks {
		if c.Flags&^knownFlags != 0 {
			return nil, fmt.Errorf("%w: chunk %d has unknown flags %#x", ErrBadIndex, i, c.Flags)
		}
		if c.StoredLen <= 0 || c.StoredLen > l.OriginalLen(i)+sealOverhead {
			return nil, fmt.Errorf("%w: chunk %d of %d original bytes stored in %d bytes", ErrBadIndex, i, l.OriginalLen(i), c.StoredLen)
		}
		l.offsets[i+1] = l.offsets[i] + c.StoredLen
	}
	return l, nil
}

// StoredSize is the stored object's size in bytes.
func (l *Layout) StoredSize() int64 { return l.offsets[len(l.Chunks)] }

// OriginalLen is the original bytes of chunk i.
func (l *Layout) OriginalLen(i int) int64 {
	return min(l.ChunkBytes, l.OriginalSize-int64(i)*l.ChunkBytes)
}

// StoredRange returns the stored bytes [off, off+n) a read of the
// original bytes [start, end) needs, and the chunks first to last
// (inclusive) they hold. end is cut at the original size; start must be
// in [0, end) (callers check: it panics otherwise).
func (l *Layout) StoredRange(start, end int64) (off, n int64, first, last int) {
	end = min(end, l.OriginalSize)
	first, last = int(start/l.ChunkBytes), int((end-1)/l.ChunkBytes)
	return l.offsets[first], l.offsets[last+1] - l.offsets[first], first, last
}

// EncodeIndex returns the chunk index in the manifest's form (see the
// package doc).
func EncodeIndex(chunks []Chunk) string {
	b := make([]byte, 0, len(chunks)*8)
	for _, c := range chunks {
		b = binary.AppendUvarint(b, uint64(c.StoredLen))
		b = append(b, c.Flags)
		b = binary.BigEndian.AppendUint32(b, c.CRC32C)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeIndex parses a chunk index in the manifest's form. Errors:
// ErrBadIndex (wrapped) for bad base64 or a truncated entry.
func DecodeIndex(s string) ([]Chunk, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadIndex, err)
	}
	var out []Chunk
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > 1<<40 || len(b) < k+5 {
			return nil, fmt.Errorf("%w: entry %d is truncated or malformed", ErrBadIndex, len(out))
		}
		out = append(out, Chunk{StoredLen: int64(n), Flags: b[k], CRC32C: binary.BigEndian.Uint32(b[k+1:])})
		b = b[k+5:]
	}
	return out, nil
}
