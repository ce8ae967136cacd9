package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/tierd/tierd/internal/kafkalog"
)

// DefaultScanBuffer is the read-ahead window of a Scanner, in bytes.
const DefaultScanBuffer = 64 << 10

// ScanOptions tune a Scanner. The zero value scans from position 0 with
// DefaultScanBuffer and no CRC verification.
type ScanOptions struct {
	// Start is the byte position of the first entry to read. It must be an
	// entry boundary (0, or a position taken from an offset index).
	Start int64
	// VerifyCRC makes the scanner check every entry's checksum; the result
	// is reported by CRCValid, and a mismatch does not stop the scan.
	VerifyCRC bool
	// BufferSize is the read-ahead window in bytes; 0 means
	// DefaultScanBuffer. Entries larger than the window are still read,
	// their checksum in window-sized pieces.
	BufferSize int
}

// Scanner walks the entries of a .log file (or any byte range holding whole
// entries) in order. It reads through an io.ReaderAt and never reads past
// size, so it can scan the committed part of a segment that is being
// appended to. Use it as
//
//	s := batch.NewScanner(f, size, batch.ScanOptions{})
//	for s.Next() { b := s.Batch(); ... }
//	if err := s.Err(); err != nil { ... }
//
// Err is nil when the scan reached size exactly. A structural problem (an
// impossible length, an unknown magic, an entry running past size) stops
// the scan with a *kafkalog.CorruptionError at the entry's position;
// ValidEnd then gives the end of the last good entry.
type Scanner struct {
	r        io.ReaderAt
	size     int64
	pos      int64
	verify   bool
	bufSize  int
	storage  []byte
	buf      []byte
	bufPos   int64
	cur      Batch
	crcValid bool
	err      error
}

// NewScanner returns a Scanner over the first size bytes of r.
func NewScanner(r io.ReaderAt, size int64, opts ScanOptions) *Scanner {
	bs := opts.BufferSize
	if bs <= 0 {
		bs = DefaultScanBuffer
	}
	return &Scanner{r: r, size: size, pos: opts.Start, verify: opts.VerifyCRC, bufSize: bs}
}

// Next advances to the next entry and reports whether there is one.
func (s *Scanner) Next() bool {
	if s.err != nil || s.pos >= s.size {
		return false
	}
	left := s.size - s.pos
	if left < PrefixSize {
		s.err = kafkalog.Corruptf(s.pos, "truncated entry: %d bytes left, need %d", left, PrefixSize)
		return false
	}
	p, err := s.window(s.pos, PrefixSize)
	if err != nil {
		s.err = err
		return false
	}
	size, magic, err := ParsePrefix(p, s.pos)
	if err != nil {
		s.err = err
		return false
	}
	if int64(size) > left {
		s.err = kafkalog.Corruptf(s.pos, "truncated entry: size %d bytes, %d left", size, left)
		return false
	}
	var b Batch
	switch {
	case magic == 2:
		var h []byte
		if h, err = s.window(s.pos, HeaderSize); err == nil {
			b, err = ParseHeader(h, s.pos)
		}
	case int(size) <= s.bufSize:
		var h []byte
		if h, err = s.window(s.pos, int(size)); err == nil {
			b, err = ParseHeader(h, s.pos)
		}
	default:
		b, err = s.bigLegacyHeader(size)
	}
	if err != nil {
		s.err = err
		return false
	}
	if s.verify {
		if s.crcValid, err = s.checkCRC(b); err != nil {
			s.err = err
			return false
		}
	}
	s.cur = b
	s.pos += int64(size)
	return true
}

// bigLegacyHeader parses a magic 0/1 message larger than the window from
// its fixed fields and its two length fields, without reading it whole.
func (s *Scanner) bigLegacyHeader(size int32) (Batch, error) {
	magic := int8(0)
	if p, err := s.window(s.pos, PrefixSize); err == nil {
		magic = int8(p[16])
	}
	kpos := legacyKeyPos(magic)
	h, err := s.window(s.pos, kpos+4)
	if err != nil {
		return Batch{}, err
	}
	b, err := legacyFixed(h, s.pos, size)
	if err != nil {
		return Batch{}, err
	}
	vpos, err := legacyValuePos(b, kpos, int32(binary.BigEndian.Uint32(h[kpos:])))
	if err != nil {
		return Batch{}, err
	}
	v, err := s.window(s.pos+int64(vpos), 4)
	if err != nil {
		return Batch{}, err
	}
	return checkLegacyValue(b, vpos, int32(binary.BigEndian.Uint32(v)))
}

// Batch returns the entry Next moved to.
func (s *Scanner) Batch() Batch { return s.cur }

// CRCValid reports whether the current entry's checksum matched; it is
// meaningful only with ScanOptions.VerifyCRC.
func (s *Scanner) CRCValid() bool { return s.crcValid }

// Err returns the error that stopped the scan, or nil at a clean end.
func (s *Scanner) Err() error { return s.err }

// ValidEnd returns the byte position after the last entry read so far.
func (s *Scanner) ValidEnd() int64 { return s.pos }

// Raw returns the bytes of the current entry in a new slice.
func (s *Scanner) Raw() ([]byte, error) {
	out := make([]byte, s.cur.Size)
	if err := readFull(s.r, out, s.cur.Position); err != nil {
		return nil, err
	}
	return out, nil
}

// Entry returns the bytes of the current entry. When the entry fits the
// read-ahead window the slice aliases the scanner's buffer and is valid
// only until the next call to Next; a larger entry is read into a new
// slice.
func (s *Scanner) Entry() ([]byte, error) {
	if int(s.cur.Size) <= s.bufSize {
		return s.window(s.cur.Position, int(s.cur.Size))
	}
	return s.Raw()
}

// CheckRecords runs Batch.CheckRecords on the current entry when it is an
// uncompressed v2 batch, reading its bytes through the window, and returns
// nil for other entries without reading them.
func (s *Scanner) CheckRecords() error {
	if s.cur.Magic != 2 || s.cur.Codec != CodecNone {
		return nil
	}
	raw, err := s.Entry()
	if err != nil {
		return err
	}
	return s.cur.CheckRecords(raw)
}

func (s *Scanner) checkCRC(b Batch) (bool, error) {
	if int(b.Size) <= s.bufSize {
		raw, err := s.window(b.Position, int(b.Size))
		if err != nil {
			return false, err
		}
		return CheckCRC(raw), nil
	}
	table, from := crcHasher(b.Magic)
	h := crc32.New(table)
	chunk := make([]byte, s.bufSize)
	for at, end := b.Position+int64(from), b.End(); at < end; {
		n := min(int64(len(chunk)), end-at)
		if err := readFull(s.r, chunk[:n], at); err != nil {
			return false, err
		}
		h.Write(chunk[:n])
		at += n
	}
	return h.Sum32() == b.CRC, nil
}

// window returns n bytes at file position pos, reading ahead up to bufSize.
func (s *Scanner) window(pos int64, n int) ([]byte, error) {
	if pos >= s.bufPos && pos+int64(n) <= s.bufPos+int64(len(s.buf)) {
		off := pos - s.bufPos
		return s.buf[off : off+int64(n)], nil
	}
	want := int64(max(n, s.bufSize))
	want = min(want, s.size-pos)
	if want < int64(n) {
		return nil, kafkalog.Corruptf(pos, "truncated entry: need %d bytes, %d left", n, s.size-pos)
	}
	if int64(cap(s.storage)) < want {
		s.storage = make([]byte, want)
	}
	buf := s.storage[:want]
	if err := readFull(s.r, buf, pos); err != nil {
		s.buf = nil
		return nil, err
	}
	s.buf, s.bufPos = buf, pos
	return buf[:n], nil
}

func readFull(r io.ReaderAt, buf []byte, pos int64) error {
	n, err := r.ReadAt(buf, pos)
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %d bytes at %d: %w", len(buf), pos, err)
}
