package locallog

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// OffsetForTimestamp returns the first offset >= from (the caller's log
// start bound; never below the local log start offset) and below limit
// (and the high watermark) whose record timestamp (ms) is >= ts, with that
// timestamp, as ListOffsets by timestamp answers; found is false when no
// record qualifies. A segment is skipped when its scan showed no timestamp
// reaching ts; within a segment the search starts where the own index or
// the .timeindex and .index (for a rolled segment not yet scanned) say
// every earlier record is older, and decodes the records of the first
// entry whose max timestamp reaches ts (every codec, legacy messages too).
// Errors: kafkalog.ErrCorrupt naming the file, ErrSegmentGone, ErrClosed,
// decompression and I/O errors.
func (p *Partition) OffsetForTimestamp(ts, from, limit int64) (offset, timestamp int64, found bool, err error) {
	err = p.withListing(func(l *listing) error {
		offset, timestamp, found, err = p.offsetForTimestamp(l, ts, from, limit)
		return err
	})
	return offset, timestamp, found, err
}

func (p *Partition) offsetForTimestamp(l *listing, ts, from, limit int64) (int64, int64, bool, error) {
	hw, err := p.highWatermark(l)
	if err != nil {
		return 0, 0, false, err
	}
	limit, from = min(limit, hw), max(from, l.start())
	for i := l.find(from); i < len(l.segs) && from < limit; i++ {
		s := l.segs[i]
		if s.base >= limit {
			break
		}
		off, t, found, err := s.offsetForTimestamp(ts, from, limit, i == len(l.segs)-1)
		if err != nil || found {
			return off, t, found, err
		}
	}
	return 0, 0, false, nil
}

func (s *segment) offsetForTimestamp(ts, from, limit int64, active bool) (int64, int64, bool, error) {
	f, end, err := s.file()
	if err != nil {
		return 0, 0, false, err
	}
	s.mu.Lock()
	if !active && !s.cur.done && len(s.fileTimeIndexLocked()) == 0 {
		// No usable .timeindex: scan the segment once instead of on
		// every search.
		s.mu.Unlock()
		if _, err := s.advance(limit, false); err != nil {
			return 0, 0, false, err
		}
		s.mu.Lock()
	}
	if active {
		end = min(end, s.cur.pos)
	}
	c := &s.cur
	if c.started && (active || c.done) && c.err == nil && c.maxTs < ts {
		s.mu.Unlock()
		return 0, 0, false, nil // scanned whole: nothing this late
	}
	trusted := s.trustedStartLocked(from)
	k := sort.Search(len(c.idx), func(k int) bool { return c.idx[k].tsBefore >= ts })
	if k > 0 {
		trusted = max(trusted, c.idx[k-1].pos)
	}
	untrusted, at := int64(-1), from
	if !active && !c.done {
		if te, ok := index.LookupTime(s.fileTimeIndexLocked(), ts); ok {
			at = max(at, te.Offset)
		}
		untrusted = s.untrustedStartLocked(at, trusted, active)
	}
	s.mu.Unlock()
	if untrusted >= 0 {
		o, t, found, err := s.searchTime(f, end, untrusted, at, ts, from, limit)
		if err == nil || !isCorrupt(err) {
			return o, t, found, err
		}
	}
	return s.searchTime(f, end, trusted, -1, ts, from, limit)
}

// fileTimeIndexLocked returns the parsed .timeindex of a rolled segment,
// nil when it is absent or does not parse cleanly.
func (s *segment) fileTimeIndexLocked() []index.TimeEntry {
	if !s.fileTidxSet {
		s.fileTidxSet = true
		if data, err := os.ReadFile(segPath(s.dir, s.base, kafkalog.TimeIndexSuffix)); err == nil {
			if e, err := index.ParseTimeIndex(data, s.base); err == nil {
				s.fileTidx = e
			}
		}
	}
	return s.fileTidx
}

// searchTime walks from byte pos to the first record at or after from,
// below limit, with a timestamp >= ts. landing >= 0 marks pos as coming
// from the indexes: the entry there must start at or below landing.
func (s *segment) searchTime(f *os.File, end, pos, landing, ts, from, limit int64) (int64, int64, bool, error) {
	if landing >= 0 && pos >= end {
		return 0, 0, false, kafkalog.Corruptf(pos, "the offset index points past the end (%d bytes)", end)
	}
	w := getWalker(f, end, hopRead)
	defer w.put()
	chk := batch.NewChecker(s.base, -1)
	for start := pos; pos < end; {
		b, err := w.header(pos)
		if err == nil {
			err = chk.Check(b)
		}
		if err == nil && landing >= 0 && pos == start && b.BaseOffset > landing {
			err = kafkalog.Corruptf(pos, "the offset index points at an entry starting at offset %d, after offset %d", b.BaseOffset, landing)
		}
		if err != nil {
			return 0, 0, false, s.walkError(f, pos, end, landing >= 0, err)
		}
		if b.LastOffset >= from && b.MaxTimestamp >= ts {
			if o, t, ok, err := s.firstRecord(w, b, from, limit, func(t int64) bool { return t >= ts }); err != nil || ok {
				return o, t, ok, err
			}
		}
		if b.LastOffset >= limit-1 {
			break
		}
		pos = b.End()
	}
	return 0, 0, false, nil
}

// walkError turns a failed header walk into its error: nil for zero bytes
// up to the end (preallocated space) on a trusted walk, corruption naming
// the file, or the I/O error.
func (s *segment) walkError(f *os.File, pos, end int64, untrusted bool, err error) error {
	if !isCorrupt(err) {
		return fmt.Errorf("locallog: read %s: %w", s.path, err)
	}
	if !untrusted {
		if nz, zerr := batch.FirstNonZero(f, pos, end); zerr == nil && nz < 0 {
			return nil
		}
	}
	return kafkalog.WithFile(err, s.path)
}

// firstRecord decodes entry b (CRC-checked) and returns its first record
// with an offset in [from, limit) whose timestamp satisfies match.
func (s *segment) firstRecord(w *walker, b batch.Batch, from, limit int64, match func(int64) bool) (int64, int64, bool, error) {
	recs, err := s.decode(w, b)
	if err != nil {
		return 0, 0, false, err
	}
	for _, r := range recs {
		if r.Offset >= from && r.Offset < limit && match(r.Timestamp) {
			return r.Offset, r.Timestamp, true, nil
		}
	}
	return 0, 0, false, nil
}

// decode reads entry b whole, checks its CRC and returns its records.
func (s *segment) decode(w *walker, b batch.Batch) ([]batch.Record, error) {
	raw, err := w.raw(b)
	if err != nil {
		return nil, fmt.Errorf("locallog: read %s: %w", s.path, err)
	}
	if !batch.CheckCRC(raw) {
		return nil, &kafkalog.CorruptionError{File: s.path, Position: b.Position, Reason: "CRC mismatch"}
	}
	recs, err := batch.Records(raw, codec.Kafka)
	if err != nil {
		var ce *kafkalog.CorruptionError
		if errors.As(err, &ce) {
			cp := *ce
			cp.File, cp.Position = s.path, b.Position+ce.Position
			return nil, &cp
		}
		return nil, fmt.Errorf("locallog: records of the entry at byte %d of %s: %w", b.Position, s.path, err)
	}
	return recs, nil
}

// MaxTimestamp is MaxTimestampFrom(0, limit): the whole local log below
// limit.
func (p *Partition) MaxTimestamp(limit int64) (offset, timestamp int64, found bool, err error) {
	return p.MaxTimestampFrom(0, limit)
}

// MaxTimestampFrom returns the first record at or after offset from (the
// caller's log start bound) and below limit (and the high watermark) with
// the largest timestamp (ms) of those records, and that timestamp
// (ListOffsets MAX_TIMESTAMP, KIP-734); found is false when none has a
// timestamp (no record, or all -1). It uses each segment's scan (read
// once), walks the entry headers of the segment holding from, and decodes
// the entries cut by from or limit and the one picked. Errors:
// kafkalog.ErrCorrupt naming the file (a rolled segment whose scan stopped
// at corruption included), ErrSegmentGone, ErrClosed, decompression and
// I/O errors.
func (p *Partition) MaxTimestampFrom(from, limit int64) (offset, timestamp int64, found bool, err error) {
	err = p.withListing(func(l *listing) error {
		offset, timestamp, found, err = p.maxTimestamp(l, from, limit)
		return err
	})
	return offset, timestamp, found, err
}

func (p *Partition) maxTimestamp(l *listing, from, limit int64) (int64, int64, bool, error) {
	hw, err := p.highWatermark(l)
	if err != nil {
		return 0, 0, false, err
	}
	limit = min(limit, hw)
	all := func(int64) bool { return true }
	best := maxCandidate{ts: -1, pos: -1}
	var cut, straddle maxCandidate
	for i, s := range l.segs {
		if s.base >= limit {
			break
		}
		if i+1 < len(l.segs) && l.segs[i+1].base <= from {
			continue // wholly below from
		}
		var m, st maxCandidate
		if s.base < from {
			m, cut, st, err = s.maxFrom(from, limit, i == len(l.segs)-1)
		} else {
			m, st, err = s.maxBelow(limit, i == len(l.segs)-1)
		}
		if err != nil {
			return 0, 0, false, err
		}
		if m.ts > best.ts {
			best = m
		}
		if st.seg != nil {
			straddle = st
		}
	}
	var first maxCandidate // the entry cut by from: before every other candidate
	if cut.seg != nil && (cut != straddle) {
		o, t, ok, err := cut.seg.maxRecord(cut.pos, from, limit, all)
		if err != nil {
			return 0, 0, false, err
		}
		if ok && t >= best.ts && t >= 0 {
			first = maxCandidate{seg: cut.seg, pos: o, ts: t}
		}
	}
	// The entry holding limit, when limit falls inside one, counts with its
	// records below limit only; it comes after every other candidate.
	if straddle.seg != nil {
		o, t, ok, err := straddle.seg.maxRecord(straddle.pos, from, limit, all)
		if err != nil {
			return 0, 0, false, err
		}
		if ok && t > best.ts && (first.seg == nil || t > first.ts) {
			return o, t, true, nil
		}
	}
	if first.seg != nil {
		return first.pos, first.ts, true, nil
	}
	if best.ts < 0 {
		return 0, 0, false, nil
	}
	o, t, ok, err := best.seg.maxRecord(best.pos, from, limit, func(t int64) bool { return t == best.ts })
	if err != nil || ok {
		return o, t, ok && t >= 0, err
	}
	// The header's max timestamp matches no record (a writer that set it
	// differently): the entry's own first maximum.
	o, t, ok, err = best.seg.maxRecord(best.pos, from, limit, all)
	return o, t, ok && t >= 0, err
}

// maxCandidate is an entry of segment seg at byte pos with max timestamp ts.
type maxCandidate struct {
	seg     *segment
	pos, ts int64
}

// maxRecord decodes the entry at pos and returns its first record in
// [from, limit) with the largest timestamp among those accepted by match.
func (s *segment) maxRecord(pos, from, limit int64, match func(int64) bool) (int64, int64, bool, error) {
	f, end, err := s.file()
	if err != nil {
		return 0, 0, false, err
	}
	w := getWalker(f, end, hopRead)
	defer w.put()
	b, err := w.header(pos)
	if err != nil {
		return 0, 0, false, s.walkError(f, pos, end, true, err)
	}
	recs, err := s.decode(w, b)
	if err != nil {
		return 0, 0, false, err
	}
	o, t, ok := int64(0), int64(-1), false
	for _, r := range recs {
		if r.Offset >= from && r.Offset < limit && match(r.Timestamp) && (!ok || r.Timestamp > t) {
			o, t, ok = r.Offset, r.Timestamp, true
		}
	}
	return o, t, ok, nil
}

// maxBelow returns the first entry with the largest max timestamp among
// the segment's entries whose last offset is below limit (ts -1 when
// none), from the segment's scan, or from a walk of its headers when the
// scan already went past limit; and the entry that holds limit, when it
// starts below limit (seg nil otherwise).
func (s *segment) maxBelow(limit int64, active bool) (best, straddle maxCandidate, err error) {
	best = maxCandidate{seg: s, ts: -1, pos: -1}
	st, err := s.advance(limit, active)
	if err != nil {
		return best, straddle, err
	}
	s.mu.Lock()
	c := s.cur
	s.mu.Unlock()
	if c.err != nil {
		return best, straddle, c.err
	}
	f, size, err := s.file()
	if err != nil {
		return best, straddle, err
	}
	w := getWalker(f, size, hopRead)
	defer w.put()
	from := int64(0)
	if c.next <= limit {
		best.ts, best.pos = c.maxTs, c.maxTsPos
		if !st.byBound {
			return best, straddle, nil
		}
		from = st.pos
	}
	for pos := from; pos < c.pos || pos == from; {
		b, err := w.header(pos)
		if err != nil {
			return best, straddle, kafkalog.WithFile(err, s.path)
		}
		if b.LastOffset >= limit {
			if b.BaseOffset < limit { // -1 for a legacy wrapper: look inside
				straddle = maxCandidate{seg: s, pos: pos}
			}
			break
		}
		if b.MaxTimestamp > best.ts {
			best.ts, best.pos = b.MaxTimestamp, pos
		}
		pos = b.End()
	}
	return best, straddle, nil
}

// maxFrom is maxBelow for the segment holding from (its base below from):
// the first entry with the largest max timestamp among those wholly in
// [from, limit), found by a walk of the entry headers from where the
// segment's scan puts from; the entry holding from, when it starts below
// it (cut); and the entry holding limit, when it starts below limit
// (straddle; the same as cut when one entry holds both).
func (s *segment) maxFrom(from, limit int64, active bool) (best, cut, straddle maxCandidate, err error) {
	best = maxCandidate{seg: s, ts: -1, pos: -1}
	st, err := s.advance(limit, active)
	if err != nil {
		return best, cut, straddle, err
	}
	s.mu.Lock()
	c := s.cur
	pos := s.trustedStartLocked(from)
	s.mu.Unlock()
	if c.err != nil {
		return best, cut, straddle, c.err
	}
	f, size, err := s.file()
	if err != nil {
		return best, cut, straddle, err
	}
	w := getWalker(f, size, hopRead)
	defer w.put()
	end := c.pos
	if st.byBound {
		end = c.pos + 1 // the entry at c.pos holds limit
	}
	for pos < end {
		b, err := w.header(pos)
		if err != nil {
			return best, cut, straddle, kafkalog.WithFile(err, s.path)
		}
		switch {
		case b.LastOffset < from:
		case b.LastOffset >= limit:
			if b.BaseOffset < limit { // -1 for a legacy wrapper: look inside
				straddle = maxCandidate{seg: s, pos: pos}
				if b.BaseOffset < from && cut.seg == nil {
					cut = straddle
				}
			}
			return best, cut, straddle, nil
		case b.BaseOffset < from && cut.seg == nil: // an entry after it starts after from
			cut = maxCandidate{seg: s, pos: pos}
		case b.MaxTimestamp > best.ts:
			best.ts, best.pos = b.MaxTimestamp, pos
		}
		pos = b.End()
	}
	return best, cut, straddle, nil
}

// withListing runs fn on the current listing, listing again and retrying
// when a segment vanished under it; after readAttempts the error wraps
// ErrSegmentGone.
func (p *Partition) withListing(fn func(*listing) error) error {
	var err error
	for attempt := 0; attempt < readAttempts; attempt++ {
		var l *listing
		if l, err = p.acquire(attempt > 0); err != nil {
			return err
		}
		err = fn(l)
		l.release()
		if !errors.Is(err, errVanished) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", ErrSegmentGone, err)
}
