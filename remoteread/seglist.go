package remoteread

import (
	"iter"
	"math"
	"slices"
	"sort"

	"github.com/tierd/tierd/internal/remotelog"
)

// finList is one partition's finished (COPY_SEGMENT_FINISHED) rows: every
// one, those a newer copy covers included, in remotelog.Before's order
// (start offset ascending), each marked kept unless a newer row covers its
// whole range. The kept rows are exactly what remotelog.Supersede returns
// for the same rows, in the same order; readers see only them.
//
// A finList is immutable: apply returns a new list that shares the chunks
// it did not change, so readers of the old one go on undisturbed. The rows
// are split into chunks of about chunkRows; an index of prefix maxima of
// the end offsets per chunk makes the look-up of an offset a binary
// search (O(log n)), and an update copies the chunks it changes and the
// index (O(n/chunkRows)), never the rows.
type finList struct {
	chunks []*finChunk
	// keptMax[i] is the largest end offset of a kept row in chunks[:i+1],
	// allMax[i] of any row there (prefix maxima, ascending); noEnd when
	// there is none.
	keptMax, allMax []int64
	kept            int // rows kept
}

// finChunk is a run of rows of a finList.
type finChunk struct {
	rows            []finRow
	keptMax, allMax int64 // the largest end offsets of its kept rows and of all its rows
	kept            int
}

// finRow is one finished row, with its offsets beside it so that scans
// need not reach the row. The row is shared (with the metadata store's
// change log and older lists): read it, never modify it.
type finRow struct {
	m          *remotelog.SegmentMetadata
	start, end int64 // m's start and end offsets
	kept       bool
}

func newFinRow(m *remotelog.SegmentMetadata, kept bool) finRow {
	return finRow{m: m, start: m.StartOffset, end: m.EndOffset, kept: kept}
}

// noEnd is below every end offset.
const noEnd = math.MinInt64

// chunkRows is the size chunks are built with; updates split a chunk at
// twice that and merge one below a quarter of it into a neighbour.
const chunkRows = 128

// newFinList builds the list of rows (in any order) from scratch: what a
// full load does, and what an update must agree with.
func newFinList(rows []remotelog.SegmentMetadata) *finList {
	kept := make(map[remotelog.SegmentID]bool, len(rows))
	for _, m := range remotelog.Supersede(rows) {
		kept[m.ID] = true
	}
	all := make([]finRow, len(rows))
	for i := range rows {
		m := rows[i] // each row its own allocation, freed when it leaves
		all[i] = newFinRow(&m, kept[m.ID])
	}
	sort.Slice(all, func(i, j int) bool { return remotelog.Before(all[i].m, all[j].m) })
	l := &finList{}
	chunks := (len(all) + chunkRows - 1) / chunkRows
	for i := 0; i < chunks; i++ { // as many rows in each, give or take one
		n := len(all) / (chunks - i)
		c := &finChunk{rows: all[:n:n]}
		c.summarize()
		l.chunks = append(l.chunks, c)
		all = all[n:]
	}
	l.reindex()
	return l
}

func (c *finChunk) summarize() {
	c.keptMax, c.allMax, c.kept = noEnd, noEnd, 0
	for _, r := range c.rows {
		c.allMax = max(c.allMax, r.end)
		if r.kept {
			c.keptMax = max(c.keptMax, r.end)
			c.kept++
		}
	}
}

// reindex rebuilds the prefix maxima and the count from the chunks'
// summaries.
func (l *finList) reindex() {
	l.reindexAll()
	l.reindexKept()
}

// reindexAll rebuilds allMax, which kept marks do not change.
func (l *finList) reindexAll() {
	l.allMax = make([]int64, len(l.chunks))
	all := int64(noEnd)
	for i, c := range l.chunks {
		all = max(all, c.allMax)
		l.allMax[i] = all
	}
}

// reindexKept rebuilds keptMax and the count of kept rows.
func (l *finList) reindexKept() {
	l.keptMax = make([]int64, len(l.chunks))
	kept := int64(noEnd)
	l.kept = 0
	for i, c := range l.chunks {
		kept = max(kept, c.keptMax)
		l.keptMax[i] = kept
		l.kept += c.kept
	}
}

// len returns the number of kept rows.
func (l *finList) len() int { return l.kept }

// finCursor is a position in a finList: a kept row, or the end.
type finCursor struct {
	l    *finList
	c, r int
}

// seek returns the first kept row whose end offset is at least offset,
// as a binary search of the kept rows by end offset would find it.
func (l *finList) seek(offset int64) finCursor {
	c := sort.Search(len(l.keptMax), func(i int) bool { return l.keptMax[i] >= offset })
	// keptMax says chunk c holds such a row: the scan stops there.
	for p := (finCursor{l: l, c: c, r: -1}).next(); ; p = p.next() {
		if !p.ok() || p.l.chunks[p.c].rows[p.r].end >= offset {
			return p
		}
	}
}

func (p finCursor) ok() bool                        { return p.c < len(p.l.chunks) }
func (p finCursor) row() *remotelog.SegmentMetadata { return p.l.chunks[p.c].rows[p.r].m }

// next returns the following kept row's position.
func (p finCursor) next() finCursor {
	for p.r++; p.c < len(p.l.chunks); p.c, p.r = p.c+1, 0 {
		for rows := p.l.chunks[p.c].rows; p.r < len(rows); p.r++ {
			if rows[p.r].kept {
				return p
			}
		}
	}
	return p
}

// from yields the kept rows from seek(offset) on.
func (l *finList) from(offset int64) iter.Seq[*remotelog.SegmentMetadata] {
	return func(yield func(*remotelog.SegmentMetadata) bool) {
		for p := l.seek(offset); p.ok(); p = p.next() {
			if !yield(p.row()) {
				return
			}
		}
	}
}

// all yields every kept row, in order.
func (l *finList) all() iter.Seq[*remotelog.SegmentMetadata] {
	return func(yield func(*remotelog.SegmentMetadata) bool) {
		for p := (finCursor{l: l, r: -1}).next(); p.ok(); p = p.next() {
			if !yield(p.row()) {
				return
			}
		}
	}
}

// apply returns the list with ops applied in order (a row set replaces
// the row of the same start offset and id, if any; a row removed that is
// not there changes nothing). It leaves l as it was.
func (l *finList) apply(ops []remotelog.FinishedOp) *finList {
	if len(ops) == 0 {
		return l
	}
	e := &finEdit{l: &finList{chunks: slices.Clone(l.chunks)}, owned: map[*finChunk]bool{}}
	for _, op := range ops {
		if old := e.remove(op.StartOffset, op.ID); old != nil {
			e.dirty = append(e.dirty, *old)
		}
		if op.Row != nil {
			e.insert(op.Row)
			e.dirty = append(e.dirty, *op.Row)
		}
	}
	e.rebalance()
	e.l.reindexAll() // what remark's covered reads
	if !e.remark() {
		return newFinList(e.rows()) // too many rows to recompute one by one
	}
	for c := range e.owned {
		c.summarize()
	}
	e.l.reindexKept()
	return e.l
}

// finEdit is an update of a finList under way. The chunks it copied
// (owned) are its own to change; the others are shared.
type finEdit struct {
	l     *finList
	owned map[*finChunk]bool
	dirty []remotelog.SegmentMetadata // rows set or removed: the rows they cover may change marks
}

// own returns chunk i as the edit's own copy.
func (e *finEdit) own(i int) *finChunk {
	c := e.l.chunks[i]
	if !e.owned[c] {
		c = &finChunk{rows: slices.Clone(c.rows)}
		e.l.chunks[i] = c
		e.owned[c] = true
	}
	return c
}

// lowerStart returns the position of the first row whose start offset is
// at least start.
func (e *finEdit) lowerStart(start int64) (int, int) {
	cs := e.l.chunks
	c := sort.Search(len(cs), func(i int) bool { return cs[i].rows[len(cs[i].rows)-1].start >= start })
	if c == len(cs) {
		return c, 0
	}
	rows := cs[c].rows
	return c, sort.Search(len(rows), func(i int) bool { return rows[i].start >= start })
}

// remove takes out the row of start and id and returns it; nil when
// there is none.
func (e *finEdit) remove(start int64, id remotelog.SegmentID) *remotelog.SegmentMetadata {
	for c, r := e.lowerStart(start); c < len(e.l.chunks); c, r = c+1, 0 {
		for rows := e.l.chunks[c].rows; r < len(rows); r++ {
			if rows[r].start != start {
				return nil
			}
			if m := rows[r].m; m.ID == id {
				ch := e.own(c)
				ch.rows = slices.Delete(ch.rows, r, r+1)
				if len(ch.rows) == 0 {
					e.l.chunks = slices.Delete(e.l.chunks, c, c+1)
				}
				return m
			}
		}
	}
	return nil
}

// insert puts m in its place, kept for now (remark decides).
func (e *finEdit) insert(m *remotelog.SegmentMetadata) {
	cs := e.l.chunks
	if len(cs) == 0 {
		c := &finChunk{}
		e.owned[c] = true
		e.l.chunks = append(e.l.chunks, c)
	}
	c := sort.Search(len(cs), func(i int) bool { return remotelog.Before(m, cs[i].rows[len(cs[i].rows)-1].m) })
	c = min(c, len(e.l.chunks)-1) // after every row: the last chunk's end
	ch := e.own(c)
	r := sort.Search(len(ch.rows), func(i int) bool { return remotelog.Before(m, ch.rows[i].m) })
	ch.rows = slices.Insert(ch.rows, r, newFinRow(m, true))
	if len(ch.rows) > 2*chunkRows {
		half := &finChunk{rows: slices.Clone(ch.rows[chunkRows:])}
		ch.rows = ch.rows[:chunkRows:chunkRows]
		e.owned[half] = true
		e.l.chunks = slices.Insert(e.l.chunks, c+1, half)
	}
}

// rebalance merges each changed chunk that fell below a quarter of
// chunkRows into a neighbour until it no longer is (or is the only
// chunk), and summarizes the changed chunks. Unchanged chunks are at
// least that large already, so every chunk of a list of more than one
// is.
func (e *finEdit) rebalance() {
	for i := 0; i < len(e.l.chunks) && len(e.l.chunks) > 1; i++ {
		c := e.l.chunks[i]
		if len(c.rows) >= chunkRows/4 || !e.owned[c] {
			continue
		}
		j := max(i-1, 0) // merge chunks j and j+1
		merged := &finChunk{rows: slices.Concat(e.l.chunks[j].rows, e.l.chunks[j+1].rows)}
		e.owned[merged] = true
		e.l.chunks[j] = merged
		e.l.chunks = slices.Delete(e.l.chunks, j+1, j+2)
		if len(merged.rows) > 2*chunkRows {
			half := &finChunk{rows: slices.Clone(merged.rows[chunkRows:])}
			merged.rows = merged.rows[:chunkRows:chunkRows]
			e.owned[half] = true
			e.l.chunks = slices.Insert(e.l.chunks, j+1, half)
		}
		i = j - 1 // the merged chunk is looked at again
	}
	for c := range e.owned {
		c.summarize()
	}
}

// remarkMax is the most rows remark recomputes one by one; past it, apply
// rebuilds the list.
const remarkMax = 4 * chunkRows

// remark recomputes the kept mark of every row a set or removed row
// covers (and of the set rows themselves): a row is kept unless a newer
// row covers its whole range (remotelog.Supersede's rule). It reports
// false, changing nothing, when more than remarkMax rows would need it.
func (e *finEdit) remark() bool {
	type pos struct{ c, r int }
	var todo []pos
	for _, d := range e.dirty {
		for c, r := e.lowerStart(d.StartOffset); c < len(e.l.chunks); c, r = c+1, 0 {
			rows := e.l.chunks[c].rows
			for ; r < len(rows) && rows[r].start <= d.EndOffset; r++ {
				if rows[r].end <= d.EndOffset {
					todo = append(todo, pos{c, r})
				}
			}
			if r < len(rows) {
				break
			}
		}
		if len(todo) > remarkMax {
			return false
		}
	}
	for _, p := range todo {
		row := e.l.chunks[p.c].rows[p.r]
		if kept := !e.covered(p.c, p.r); kept != row.kept {
			e.own(p.c).rows[p.r].kept = kept
		}
	}
	return true
}

// covered reports whether a newer row covers the whole range of the row
// at (c, r). Only rows before it in Before's order can: a row after it
// starts later, ends sooner, or is an older copy of the same range.
func (e *finEdit) covered(c, r int) bool {
	x := e.l.chunks[c].rows[r]
	for ; c >= 0; c, r = c-1, -1 {
		if e.l.allMax[c] < x.end {
			return false // no row up to here reaches x's end
		}
		rows := e.l.chunks[c].rows
		if r < 0 {
			r = len(rows)
		}
		for i := r - 1; i >= 0; i-- {
			if o := rows[i]; o.end >= x.end && remotelog.Newer(o.m, x.m) {
				return true
			}
		}
	}
	return false
}

// rows returns a copy of every row of the edited list.
func (e *finEdit) rows() []remotelog.SegmentMetadata {
	var out []remotelog.SegmentMetadata
	for _, c := range e.l.chunks {
		for _, r := range c.rows {
			out = append(out, *r.m)
		}
	}
	return out
}
