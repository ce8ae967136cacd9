package remoteread

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// checkList fails the test unless l is well formed: no empty, small
// (of several) or oversized chunk,
// offsets beside each row equal to the row's, chunk summaries and prefix
// maxima true to the rows.
func checkList(t *testing.T, l *finList) {
	t.Helper()
	kept, keptMax, allMax := 0, int64(noEnd), int64(noEnd)
	if len(l.keptMax) != len(l.chunks) || len(l.allMax) != len(l.chunks) {
		t.Fatalf("index of %d and %d entries for %d chunks", len(l.keptMax), len(l.allMax), len(l.chunks))
	}
	for i, c := range l.chunks {
		if len(c.rows) == 0 || len(c.rows) > 2*chunkRows || (len(l.chunks) > 1 && len(c.rows) < chunkRows/4) {
			t.Fatalf("chunk %d of %d has %d rows", i, len(l.chunks), len(c.rows))
		}
		want := &finChunk{rows: c.rows}
		want.summarize()
		if c.keptMax != want.keptMax || c.allMax != want.allMax || c.kept != want.kept {
			t.Fatalf("chunk %d summary %d/%d/%d, want %d/%d/%d", i, c.keptMax, c.allMax, c.kept, want.keptMax, want.allMax, want.kept)
		}
		for _, r := range c.rows {
			if r.start != r.m.StartOffset || r.end != r.m.EndOffset {
				t.Fatalf("chunk %d: offsets %d-%d beside row %d-%d", i, r.start, r.end, r.m.StartOffset, r.m.EndOffset)
			}
		}
		kept += c.kept
		keptMax, allMax = max(keptMax, c.keptMax), max(allMax, c.allMax)
		if l.keptMax[i] != keptMax || l.allMax[i] != allMax {
			t.Fatalf("index %d: %d/%d, want %d/%d", i, l.keptMax[i], l.allMax[i], keptMax, allMax)
		}
	}
	if l.kept != kept {
		t.Fatalf("kept %d, want %d", l.kept, kept)
	}
}

// flat returns every row of l with its kept mark, in order.
func flat(l *finList) (rows []remotelog.SegmentMetadata, kept []bool) {
	for _, c := range l.chunks {
		for _, r := range c.rows {
			rows, kept = append(rows, *r.m), append(kept, r.kept)
		}
	}
	return rows, kept
}

func keptRows(l *finList) []remotelog.SegmentMetadata {
	var out []remotelog.SegmentMetadata
	for m := range l.all() {
		out = append(out, *m)
	}
	return out
}

// sameList fails the test unless got (updated) and want (built whole) hold
// the same rows, marks and order, and got's kept rows are what
// remotelog.Supersede keeps.
func sameList(t *testing.T, step string, got, want *finList, model []remotelog.SegmentMetadata) {
	t.Helper()
	checkList(t, got)
	gr, gk := flat(got)
	wr, wk := flat(want)
	if !reflect.DeepEqual(gr, wr) || !slices.Equal(gk, wk) {
		t.Fatalf("%s: updated list differs from the one built whole:\n got %v %v\nwant %v %v", step, ids(gr), gk, ids(wr), wk)
	}
	if sup, k := remotelog.Supersede(model), keptRows(got); !reflect.DeepEqual(ids(sup), ids(k)) || got.len() != len(sup) {
		t.Fatalf("%s: kept %v, Supersede keeps %v", step, ids(k), ids(sup))
	}
}

func ids(rows []remotelog.SegmentMetadata) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%d-%d/%s", r.StartOffset, r.EndOffset, r.ID.String()[:4])
	}
	return out
}

// An updated list is exactly the list built whole from the same rows,
// under random sequences of copies finished, rows changed (a later event,
// damage) and rows removed (deletion started), with nested, overlapping
// and duplicate ranges; and seek finds what a scan of the kept rows does.
func TestFinListUpdateMatchesRebuild(t *testing.T) {
	for seed := uint64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*7))
			tp := remotelog.TopicPartition{Topic: "t", Partition: 1}
			model := map[remotelog.SegmentID]remotelog.SegmentMetadata{}
			rows := func() []remotelog.SegmentMetadata {
				out := make([]remotelog.SegmentMetadata, 0, len(model))
				for _, m := range model {
					out = append(out, m)
				}
				return out
			}
			pick := func() (remotelog.SegmentMetadata, bool) {
				for _, m := range model { // map order is random enough
					return m, true
				}
				return remotelog.SegmentMetadata{}, false
			}
			span := int64(2000 + 3000*int(seed%3)) // denser offsets: more overlaps
			l := newFinList(nil)
			for step := 0; step < 800; step++ {
				grow := step < 500 // then mostly removals, to empty and merge chunks
				var ops []remotelog.FinishedOp
				for n := 1 + rng.IntN(3); n > 0; n-- {
					switch k := rng.IntN(10); {
					case k < 5 && grow, k < 1:
						start := rng.Int64N(span)
						m := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: start,
							EndOffset: start + rng.Int64N(1+rng.Int64N(60)), EventTimestampMs: rng.Int64N(4),
							State: remotelog.CopySegmentFinished}
						if rng.IntN(20) == 0 { // a copy of a range already there
							if o, ok := pick(); ok {
								m.StartOffset, m.EndOffset = o.StartOffset, o.EndOffset
							}
						}
						model[m.ID] = m
						ops = append(ops, remotelog.FinishedOp{StartOffset: m.StartOffset, ID: m.ID, Row: &m})
					case k < 7 && grow, k < 3:
						if m, ok := pick(); ok {
							if rng.IntN(2) == 0 {
								m.Damaged = "missing .index"
							} else {
								m.EventTimestampMs = rng.Int64N(4)
							}
							model[m.ID] = m
							ops = append(ops, remotelog.FinishedOp{StartOffset: m.StartOffset, ID: m.ID, Row: &m})
						}
					case k < 9 || !grow:
						if m, ok := pick(); ok {
							delete(model, m.ID)
							ops = append(ops, remotelog.FinishedOp{StartOffset: m.StartOffset, ID: m.ID})
						}
					default: // removing a row that is not there changes nothing
						ops = append(ops, remotelog.FinishedOp{StartOffset: rng.Int64N(span), ID: remotelog.NewSegmentID()})
					}
				}
				before, beforeKept := flat(l)
				next := l.apply(ops)
				if after, afterKept := flat(l); !reflect.DeepEqual(before, after) || !slices.Equal(beforeKept, afterKept) {
					t.Fatalf("step %d: apply changed the list it was given", step)
				}
				l = next
				sameList(t, fmt.Sprintf("step %d", step), l, newFinList(rows()), rows())
				kept := keptRows(l)
				for i := 0; i < 5; i++ {
					off := rng.Int64N(span + 100)
					want := slices.IndexFunc(kept, func(m remotelog.SegmentMetadata) bool { return m.EndOffset >= off })
					p := l.seek(off)
					if (want < 0) != !p.ok() || (want >= 0 && p.row().ID != kept[want].ID) {
						t.Fatalf("step %d: seek(%d) found %v, want index %d", step, off, p.ok(), want)
					}
				}
			}
		})
	}
}

// A change of more rows than remark recomputes one by one (a row that
// covers thousands) still gives the list built whole.
func TestFinListWideCover(t *testing.T) {
	var rows []remotelog.SegmentMetadata
	for i := int64(0); i < 3000; i++ {
		rows = append(rows, remotelog.SegmentMetadata{ID: remotelog.NewSegmentID(), StartOffset: i * 10, EndOffset: i*10 + 9, EventTimestampMs: 1})
	}
	l := newFinList(rows)
	wide := remotelog.SegmentMetadata{ID: remotelog.NewSegmentID(), StartOffset: 0, EndOffset: 29_999, EventTimestampMs: 2}
	l = l.apply([]remotelog.FinishedOp{{StartOffset: 0, ID: wide.ID, Row: &wide}})
	all := append(slices.Clone(rows), wide)
	sameList(t, "wide row added", l, newFinList(all), all)
	if l.len() != 1 {
		t.Fatalf("%d rows kept, want the wide one only", l.len())
	}
	l = l.apply([]remotelog.FinishedOp{{StartOffset: 0, ID: wide.ID}})
	sameList(t, "wide row removed", l, newFinList(rows), rows)
	if l.len() != len(rows) {
		t.Fatalf("%d rows kept, want %d", l.len(), len(rows))
	}
}
