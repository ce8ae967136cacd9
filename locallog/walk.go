package locallog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// Read-ahead sizes of a walker, in bytes.
const (
	// windowSize is the walker's buffer; CRC scans read this much at once.
	windowSize = 64 << 10
	// hopRead is what a header-only walk reads at a time: enough for a few
	// small batches, little of a large one.
	hopRead = 8 << 10
)

// walker reads the entries of one file, up to end, through a window
// buffer. Walkers are pooled: get one with getWalker, return it with put.
type walker struct {
	r         io.ReaderAt
	end       int64
	readAhead int
	buf       []byte
	wpos      int64 // file position of buf[0]
	wlen      int   // valid bytes in buf
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var walkers = sync.Pool{New: func() any { return &walker{buf: make([]byte, windowSize)} }}

func getWalker(r io.ReaderAt, end int64, readAhead int) *walker {
	w := walkers.Get().(*walker)
	w.r, w.end, w.readAhead, w.wpos, w.wlen = r, end, readAhead, 0, 0
	return w
}

func (w *walker) put() {
	w.r = nil
	walkers.Put(w)
}

// bytes returns n bytes at pos, from the window when it holds them. The
// slice is valid until the next call. n larger than the window is read into
// a new slice.
func (w *walker) bytes(pos int64, n int) ([]byte, error) {
	if pos >= w.wpos && pos+int64(n) <= w.wpos+int64(w.wlen) {
		off := pos - w.wpos
		return w.buf[off : off+int64(n)], nil
	}
	if left := w.end - pos; left < int64(n) {
		return nil, kafkalog.Corruptf(pos, "truncated entry: need %d bytes, %d left", n, left)
	}
	if n > len(w.buf) {
		out := make([]byte, n)
		return out, readFull(w.r, out, pos)
	}
	m := int(min(int64(max(n, w.readAhead)), w.end-pos))
	w.wlen = 0
	if err := readFull(w.r, w.buf[:m], pos); err != nil {
		return nil, err
	}
	w.wpos, w.wlen = pos, m
	return w.buf[:n], nil
}

// header parses the entry at pos: its prefix, then the v2 header or the
// whole legacy message. Errors: *kafkalog.CorruptionError for an entry
// that is malformed or runs past end, I/O errors otherwise.
func (w *walker) header(pos int64) (batch.Batch, error) {
	left := w.end - pos
	if left < batch.PrefixSize {
		return batch.Batch{}, kafkalog.Corruptf(pos, "truncated entry: %d bytes left, need %d", left, batch.PrefixSize)
	}
	p, err := w.bytes(pos, batch.PrefixSize)
	if err != nil {
		return batch.Batch{}, err
	}
	size, magic, err := batch.ParsePrefix(p, pos)
	if err != nil {
		return batch.Batch{}, err
	}
	if int64(size) > left {
		return batch.Batch{}, kafkalog.Corruptf(pos, "truncated entry: size %d bytes, %d left", size, left)
	}
	n := batch.HeaderSize
	if magic < 2 {
		n = int(size)
	}
	h, err := w.bytes(pos, n)
	if err != nil {
		return batch.Batch{}, err
	}
	return batch.ParseHeader(h, pos)
}

// crcValid checks the stored checksum of entry b (see batch.CheckCRC),
// reading an entry larger than the window in pieces.
func (w *walker) crcValid(b batch.Batch) (bool, error) {
	if int(b.Size) <= len(w.buf) {
		raw, err := w.bytes(b.Position, int(b.Size))
		if err != nil {
			return false, err
		}
		return batch.CheckCRC(raw), nil
	}
	table, from := castagnoli, int64(21)
	if b.Magic < 2 {
		table, from = crc32.IEEETable, 16
	}
	var sum uint32
	for at, end := b.Position+from, b.End(); at < end; {
		n := int(min(int64(len(w.buf)), end-at))
		w.wlen = 0
		if err := readFull(w.r, w.buf[:n], at); err != nil {
			return false, err
		}
		sum = crc32.Update(sum, table, w.buf[:n])
		at += int64(n)
	}
	return sum == b.CRC, nil
}

// raw returns the whole entry b in a new slice.
func (w *walker) raw(b batch.Batch) ([]byte, error) {
	out := make([]byte, b.Size)
	return out, readFull(w.r, out, b.Position)
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

// isCorrupt reports whether err says the bytes are bad (as opposed to an
// I/O failure).
func isCorrupt(err error) bool { return errors.Is(err, kafkalog.ErrCorrupt) }
