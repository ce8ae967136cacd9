package locallog

import (
	"errors"
	"fmt"
	"os"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// readAttempts bounds how often a read lists the directory again after a
// segment vanished under it.
const readAttempts = 3

// Read returns whole entries (v2 batches or legacy messages) as stored,
// starting with the entry whose last offset is >= offset (an offset in a
// compacted gap reads from the next entry, in the next segment when
// needed): that entry always, even when larger than maxBytes (bytes), then
// the following entries of the same segment while the total stays within
// maxBytes. It never returns an entry whose last offset is >= limit (the
// caller passes HighWatermark or LastStableOffset; the high watermark
// bounds it in any case). At the bound the result is empty and the error
// nil. Every returned entry passed its CRC check.
//
// Errors: ErrBelowLocalStart (wrapped) for offset < LocalLogStartOffset;
// *OffsetOutOfRangeError for offset > HighWatermark; ErrSegmentGone
// (wrapped) when the segment was deleted, renamed or is being swapped by
// the log cleaner between listing and reading and a fresh listing no
// longer has the offset; kafkalog.ErrCorrupt wrapped with the file and
// position for a malformed entry or a CRC mismatch in the served range;
// ErrClosed; I/O errors.
func (p *Partition) Read(offset int64, maxBytes int, limit int64) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		l, err := p.acquire(attempt > 0)
		if err != nil {
			return nil, err
		}
		if p.testAcquired != nil {
			p.testAcquired()
		}
		data, err := p.read(l, offset, maxBytes, limit, attempt > 0)
		l.release()
		if !errors.Is(err, errVanished) {
			return data, err
		}
		if attempt+1 == readAttempts {
			return nil, fmt.Errorf("%w: %w", ErrSegmentGone, err)
		}
	}
}

func (p *Partition) read(l *listing, offset int64, maxBytes int, limit int64, retried bool) ([]byte, error) {
	hw, err := p.highWatermark(l)
	if err != nil {
		return nil, err
	}
	start := l.start()
	if offset < start {
		if retried {
			return nil, fmt.Errorf("%w: offset %d, local log start offset now %d", ErrSegmentGone, offset, start)
		}
		return nil, fmt.Errorf("%w: offset %d, local log start offset %d", ErrBelowLocalStart, offset, start)
	}
	if offset > hw {
		return nil, &OffsetOutOfRangeError{Offset: offset, LocalLogStartOffset: start, HighWatermark: hw}
	}
	limit = min(limit, hw)
	for i := l.find(offset); i < len(l.segs) && offset < limit; i++ {
		s := l.segs[i]
		if s.base >= limit {
			break
		}
		data, found, err := s.read(offset, maxBytes, limit, i == len(l.segs)-1, l.nextBase(i))
		if err != nil || found {
			return data, err
		}
		// Nothing at or after offset in this segment: a compacted gap, or a
		// cleaner swap in progress whose new segment is not live yet.
		if next := l.nextBase(i); next >= 0 && l.swapBetween(s.base, next-1) {
			return nil, fmt.Errorf("%w: log cleaner swap in progress after %s", errVanished, s.path)
		}
	}
	return nil, nil
}

// read serves Read from one segment; found is false when the segment holds
// no entry whose last offset is >= offset.
func (s *segment) read(offset int64, maxBytes int, limit int64, active bool, nextBase int64) (data []byte, found bool, err error) {
	s.mu.Lock()
	f, err := s.fileLocked()
	end := int64(-1)
	switch {
	case active:
		end = s.cur.pos // the validated part only
	case s.cur.done:
		end = s.cur.size
	}
	exact := s.exactHintLocked(offset)
	trusted := s.trustedStartLocked(offset)
	untrusted := s.untrustedStartLocked(offset, trusted, active)
	s.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	if end < 0 {
		st, err := f.Stat()
		if err != nil {
			return nil, false, fmt.Errorf("locallog: stat %s: %w", s.path, err)
		}
		end = st.Size()
	}
	r := served{s: s, f: f, end: end, maxBytes: maxBytes, limit: limit, nextBase: nextBase}
	if exact >= 0 {
		// The previous read ended here: the entry at exact is the first
		// whose last offset reaches offset.
		if exact >= end {
			return nil, false, nil
		}
		return r.read(exact, 0)
	}
	if untrusted >= 0 {
		data, found, err = r.locateAndRead(untrusted, true, offset)
		if err == nil || !isCorrupt(err) {
			return data, found, err
		}
		// The .index misled the walk; start over from a trusted position.
	}
	return r.locateAndRead(trusted, false, offset)
}

// served is one segment read's bounds.
type served struct {
	s        *segment
	f        *os.File
	end      int64 // bytes of the segment that may be served
	maxBytes int
	limit    int64
	nextBase int64
}

// locateAndRead walks from byte from (an entry boundary) to the first
// entry whose last offset is >= offset and reads from there. When
// untrusted, from came from the .index: a landing that breaks the
// segment's rules is reported as corruption so the caller retries from a
// trusted position.
func (r served) locateAndRead(from int64, untrusted bool, offset int64) ([]byte, bool, error) {
	first, found, err := r.s.locate(r.f, r.end, from, untrusted, offset)
	if err != nil || !found {
		return nil, found, err
	}
	if first.LastOffset >= r.limit {
		return nil, true, nil
	}
	return r.read(first.Position, int64(first.Size))
}

// read reads the entries from byte pos, where the first served entry
// starts (firstSize bytes long, 0 when not known yet), with one pread into
// one allocation of at most maxBytes (the first entry's size when larger),
// and checks each in memory: header rules, CRC, the limit.
func (r served) read(pos, firstSize int64) ([]byte, bool, error) {
	s := r.s
	n := max(min(int64(max(r.maxBytes, 0)), r.end-pos), firstSize, min(batch.PrefixSize, r.end-pos))
	out := make([]byte, n)
	if err := readFull(r.f, out, pos); err != nil {
		return nil, false, fmt.Errorf("locallog: read %s: %w", s.path, err)
	}
	if firstSize == 0 && n >= batch.PrefixSize {
		if size, _, err := batch.ParsePrefix(out, pos); err == nil && int64(size) > n && pos+int64(size) <= r.end {
			out = make([]byte, size) // the first entry is larger than maxBytes
			if err := readFull(r.f, out, pos); err != nil {
				return nil, false, fmt.Errorf("locallog: read %s: %w", s.path, err)
			}
			n = int64(size)
		}
	}
	chk := batch.NewChecker(s.base, r.nextBase-1)
	var i int64
	var last batch.Batch
	for i < n {
		b, err := parseServed(out[i:], pos+i)
		if err == nil && b.LastOffset >= r.limit {
			break
		}
		if err == nil {
			err = chk.Check(b)
		}
		if err == nil && !batch.CheckCRC(out[i:i+int64(b.Size)]) {
			err = kafkalog.Corruptf(b.Position, "CRC mismatch in the entry ending at offset %d", b.LastOffset)
		}
		if err != nil {
			if i == 0 {
				if firstSize == 0 {
					if nz, zerr := batch.FirstNonZero(r.f, pos, r.end); zerr == nil && nz < 0 {
						return nil, false, nil // preallocated zeros: the segment's end
					}
				}
				if errors.Is(err, errDoesNotFit) {
					err = kafkalog.Corruptf(pos, "truncated entry at the end of the segment (%d bytes)", r.end)
				}
				return nil, false, kafkalog.WithFile(err, s.path)
			}
			break // served up to here; the next read reports it
		}
		i += int64(b.Size)
		last = b
	}
	if i == 0 {
		return nil, true, nil
	}
	s.mu.Lock()
	s.addHintLocked(last.LastOffset+1, pos+i)
	s.mu.Unlock()
	return out[:i:i], true, nil
}

// errDoesNotFit ends an in-memory walk at an entry the buffer holds only
// part of.
var errDoesNotFit = errors.New("locallog: entry does not fit the buffer")

// parseServed parses the entry at the start of buf, which must hold it
// whole; pos is its file position.
func parseServed(buf []byte, pos int64) (batch.Batch, error) {
	if len(buf) < batch.PrefixSize {
		return batch.Batch{}, errDoesNotFit
	}
	size, _, err := batch.ParsePrefix(buf, pos)
	if err != nil {
		return batch.Batch{}, err
	}
	if int(size) > len(buf) {
		return batch.Batch{}, errDoesNotFit
	}
	return batch.ParseHeader(buf[:size], pos)
}

// locate walks entry headers from byte from up to end and returns the
// first entry whose last offset is >= offset; found is false when the
// segment has none (its end, or zero bytes up to its end). Errors:
// corruption naming the file and position, I/O.
func (s *segment) locate(f *os.File, end, from int64, untrusted bool, offset int64) (batch.Batch, bool, error) {
	if untrusted && from >= end {
		return batch.Batch{}, false, kafkalog.Corruptf(from, "the offset index points past the end (%d bytes)", end)
	}
	w := getWalker(f, end, hopRead)
	defer w.put()
	chk := batch.NewChecker(s.base, -1)
	for pos := from; pos < end; {
		b, err := w.header(pos)
		if err == nil {
			err = chk.Check(b)
		}
		if err == nil && untrusted && pos == from && b.BaseOffset > offset {
			err = kafkalog.Corruptf(pos, "the offset index points at an entry starting at offset %d, after offset %d", b.BaseOffset, offset)
		}
		if err != nil {
			if !isCorrupt(err) {
				return batch.Batch{}, false, fmt.Errorf("locallog: read %s: %w", s.path, err)
			}
			if !untrusted {
				if nz, zerr := batch.FirstNonZero(f, pos, end); zerr == nil && nz < 0 {
					return batch.Batch{}, false, nil // preallocated zeros: the end
				}
			}
			return batch.Batch{}, false, kafkalog.WithFile(err, s.path)
		}
		if b.LastOffset >= offset {
			return b, true, nil
		}
		pos = b.End()
	}
	return batch.Batch{}, false, nil
}
