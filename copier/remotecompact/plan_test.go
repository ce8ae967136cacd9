package remotecompact

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// planRow is a finished row for the plan tests: offsets [start, end],
// size bytes, finished at event ms; merged marks a copy a remote
// compaction wrote.
func planRow(start, end, size, event int64, merged bool) remotelog.SegmentMetadata {
	m := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t"}, ID: remotelog.NewSegmentID(), StartOffset: start,
		EndOffset: end, SizeInBytes: size, EventTimestampMs: event, State: remotelog.CopySegmentFinished}
	if merged {
		m.CompactionOf = []remotelog.SegmentID{remotelog.NewSegmentID()}
	}
	return m
}

func TestPlanCompaction(t *testing.T) {
	s := Settings{SegmentBytes: 1000, DirtyRatio: 0.5}
	const now = 100
	type want struct {
		ok         bool
		start, end int64
		atStart    bool
	}
	cases := []struct {
		name       string
		rows       []remotelog.SegmentMetadata
		localStart int64
		logStart   int64
		mutate     func([]remotelog.SegmentMetadata)
		s          Settings
		want       want
	}{
		{name: "two adjacent copies from the log start", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false), planRow(10, 19, 100, 1, false)},
			localStart: math.MaxInt64, want: want{true, 0, 19, true}},
		{name: "one copy is no run", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false)}, localStart: math.MaxInt64},
		{name: "a gap ends a run", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false), planRow(11, 19, 100, 1, false)},
			localStart: math.MaxInt64},
		{name: "copies still local are left alone", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false), planRow(10, 19, 100, 1, false),
			planRow(20, 29, 100, 1, false)}, localStart: 20, want: want{true, 0, 19, true}},
		{name: "local from the second copy on", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false), planRow(10, 19, 100, 1, false)},
			localStart: 10},
		{name: "copies finished this very ms wait", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false), planRow(10, 19, 100, now, false)},
			localStart: math.MaxInt64},
		{name: "segment.bytes bounds the run", rows: []remotelog.SegmentMetadata{planRow(0, 9, 600, 1, false), planRow(10, 19, 300, 1, false),
			planRow(20, 29, 300, 1, false), planRow(30, 39, 300, 1, false)}, localStart: math.MaxInt64, want: want{true, 0, 19, true}},
		{name: "a full merged copy is passed by", rows: []remotelog.SegmentMetadata{planRow(0, 9, 900, 1, true), planRow(10, 19, 100, 1, false),
			planRow(20, 29, 100, 1, false)}, localStart: math.MaxInt64, want: want{true, 10, 29, false}},
		{name: "a merged copy with enough dirty bytes after it is merged again", rows: []remotelog.SegmentMetadata{planRow(0, 9, 400, 1, true),
			planRow(10, 19, 300, 1, false), planRow(20, 29, 200, 1, false)}, localStart: math.MaxInt64, want: want{true, 0, 29, true}},
		{name: "not dirty enough", rows: []remotelog.SegmentMetadata{planRow(0, 9, 400, 1, true), planRow(10, 19, 300, 1, false)},
			localStart: math.MaxInt64},
		{name: "dirty ratio 0 merges merged copies", rows: []remotelog.SegmentMetadata{planRow(0, 9, 400, 1, true), planRow(10, 19, 300, 1, true)},
			localStart: math.MaxInt64, s: Settings{SegmentBytes: 1000, DirtyRatio: 0}, want: want{true, 0, 19, true}},
		{name: "a damaged copy splits runs", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false), planRow(10, 19, 100, 1, false),
			planRow(20, 29, 100, 1, false), planRow(30, 39, 100, 1, false)}, localStart: math.MaxInt64,
			mutate: func(rows []remotelog.SegmentMetadata) { rows[0].Damaged, rows[1].Damaged = ".log", ".log" }, want: want{true, 20, 39, false}},
		{name: "only a damaged copy between", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false), planRow(10, 19, 100, 1, false),
			planRow(20, 29, 100, 1, false)}, localStart: math.MaxInt64, mutate: func(rows []remotelog.SegmentMetadata) { rows[1].Damaged = ".log" }},
		{name: "copies below the log start offset are retention's", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false),
			planRow(10, 19, 100, 1, false), planRow(20, 29, 100, 1, false)}, localStart: math.MaxInt64, logStart: 10, want: want{true, 10, 29, true}},
		{name: "another incarnation ends a run", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false), planRow(10, 19, 100, 1, false)},
			localStart: math.MaxInt64, mutate: func(rows []remotelog.SegmentMetadata) { rows[1].TopicID = "other" }},
		{name: "an older copy a newer one covers takes no part", rows: []remotelog.SegmentMetadata{planRow(0, 19, 200, 2, true),
			planRow(0, 9, 100, 1, false), planRow(20, 29, 100, 1, false)}, localStart: math.MaxInt64,
			s: Settings{SegmentBytes: 1000, DirtyRatio: 0.3}, want: want{true, 0, 29, true}},
		{name: "offsets spanning more than an index entry reaches", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false),
			planRow(10, 1<<31+5, 100, 1, false)}, localStart: math.MaxInt64},
		// An unclean leader election leaves a newer, shorter copy of part
		// of an older copy's range (the new leader's diverged log): both
		// are kept. Merging the older one with its neighbour would cover
		// the newer one too, and retention would then delete it as
		// superseded though the merged copy never read it.
		{name: "a newer copy inside a run's range stops it", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false),
			planRow(10, 19, 100, 1, false), planRow(10, 14, 100, 2, false)}, localStart: math.MaxInt64},
		{name: "partly overlapping copies take no part", rows: []remotelog.SegmentMetadata{planRow(0, 9, 100, 1, false),
			planRow(10, 19, 100, 1, false), planRow(15, 24, 100, 2, false), planRow(25, 29, 100, 2, false), planRow(30, 39, 100, 2, false)},
			localStart: math.MaxInt64, want: want{true, 25, 39, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mutate != nil {
				tc.mutate(tc.rows)
			}
			st := s
			if tc.s.SegmentBytes != 0 {
				st = tc.s
			}
			run, ok := Plan(tc.rows, tc.localStart, tc.logStart, now, st)
			got := want{ok: ok}
			if ok {
				got = want{true, run.Start(), run.End(), run.AtLogStart}
				for i := 1; i < len(run.Copies); i++ {
					if run.Copies[i].StartOffset != run.Copies[i-1].EndOffset+1 {
						t.Fatalf("run not contiguous: %v", run)
					}
				}
			}
			if ok {
				// The merged copy must supersede the run's copies and no
				// other copy a reader sees: any other one would be deleted
				// as superseded with none of its records in the merge.
				merged := planRow(run.Start(), run.End(), 1, now+1, true)
				was := map[remotelog.SegmentID]bool{}
				for _, m := range remotelog.Supersede(tc.rows) {
					was[m.ID] = true
				}
				in := map[remotelog.SegmentID]bool{}
				for _, m := range run.Copies {
					in[m.ID] = true
				}
				still := map[remotelog.SegmentID]bool{}
				for _, m := range remotelog.Supersede(append(slices.Clone(tc.rows), merged)) {
					still[m.ID] = true
				}
				for id := range was {
					if !in[id] && !still[id] {
						t.Fatalf("merging %s would supersede copy %s, which it does not merge", describe(run), id)
					}
				}
			}
			if got != tc.want {
				t.Fatalf("planned %+v (%s), want %+v", got, describe(run), tc.want)
			}
		})
	}
}

func describe(r Run) string {
	if len(r.Copies) == 0 {
		return "nothing"
	}
	return fmt.Sprint(r)
}
