package retention

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// seg is a rolled local segment [base, end] of size bytes; end -1 makes it
// the active one.
func seg(base, end, size int64) Segment { return Segment{Base: base, End: end, Size: size} }

// row is a finished copy of [start, end], size bytes, with max timestamp
// maxTs and copy (event) time event.
func row(start, end, size, maxTs, event int64) remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t"}, ID: remotelog.NewSegmentID(), StartOffset: start,
		EndOffset: end, SizeInBytes: size, MaxTimestampMs: maxTs, EventTimestampMs: event, State: remotelog.CopySegmentFinished}
}

// lim is Limits with the local ones following the total ones.
func lim(ms, bytes int64) Limits {
	return Limits{RetentionMs: ms, RetentionBytes: bytes, LocalRetentionMs: -2, LocalRetentionBytes: -2}
}

func localLim(ms, bytes int64) Limits {
	return Limits{RetentionMs: -1, RetentionBytes: -1, LocalRetentionMs: ms, LocalRetentionBytes: bytes}
}

// TestPlanLocal: which local segments local retention deletes, why, with
// what proof, and why it stops where it does.
func TestPlanLocal(t *testing.T) {
	const now = 1_000_000
	// Three rolled segments of 100 bytes, each with its exact copy, and an
	// empty active segment; their times are 300, 200 and 100 ms old.
	three := []Segment{seg(0, 9, 100), seg(10, 19, 100), seg(20, 29, 100), seg(30, -1, 0)}
	threeCopies := []remotelog.SegmentMetadata{row(0, 9, 100, 0, 0), row(10, 19, 100, 0, 0), row(20, 29, 100, 0, 0)}
	ages := []int64{300, 200, 100}
	byAge := func(i int) (int64, error) { return now - ages[i], nil }
	noTime := func(t *testing.T) func(int) (int64, error) {
		return func(i int) (int64, error) { t.Errorf("time of segment %d read", i); return 0, nil }
	}
	type want struct {
		why   []Reason // one per deleted segment, oldest first
		exact []bool   // nil: every deleted segment with an exact copy
		stop  Stop
		err   bool
	}
	cases := []struct {
		name  string
		in    LocalInput
		time  func(t *testing.T) func(int) (int64, error) // nil: byAge
		cover []int                                       // how many copies prove each deleted segment (nil: 1, or 0 below the log start)
		want  want
	}{
		{name: "size: the oldest go until the local log is within the limit", in: LocalInput{Segments: three, Copies: threeCopies, Limits: localLim(-1, 150)},
			want: want{why: []Reason{LocalBytes, LocalBytes}, stop: StopWithinLimits}},
		{name: "size: a local log exactly at the limit keeps all", in: LocalInput{Segments: three, Copies: threeCopies, Limits: localLim(-1, 300)},
			time: noTime, want: want{stop: StopWithinLimits}},
		{name: "size: one byte over deletes one", in: LocalInput{Segments: three, Copies: threeCopies, Limits: localLim(-1, 299)},
			want: want{why: []Reason{LocalBytes}, stop: StopWithinLimits}},
		{name: "the active segment stays, whatever the limit", in: LocalInput{Segments: three, Copies: threeCopies, Limits: localLim(0, 0)},
			time: noTime, want: want{why: []Reason{LocalBytes, LocalBytes, LocalBytes}, stop: StopActive}},
		{name: "the active segment's bytes count", in: LocalInput{Segments: []Segment{seg(0, 9, 100), seg(10, -1, 100)}, Copies: threeCopies[:1],
			Limits: localLim(-1, 150)}, want: want{why: []Reason{LocalBytes}, stop: StopActive}},
		{name: "time: older than the limit goes, exactly the limit old stays", in: LocalInput{Segments: three, Copies: threeCopies, Limits: localLim(200, -1)},
			want: want{why: []Reason{LocalTime}, stop: StopWithinLimits}},
		{name: "time: a limit of 0 deletes every copied segment", in: LocalInput{Segments: three, Copies: threeCopies, Limits: localLim(0, -1)},
			want: want{why: []Reason{LocalTime, LocalTime, LocalTime}, stop: StopActive}},
		{name: "-1: unlimited, no time read", in: LocalInput{Segments: three, Copies: threeCopies, Limits: localLim(-1, -1)},
			time: noTime, want: want{stop: StopWithinLimits}},
		{name: "-2: local.retention.bytes follows retention.bytes", in: LocalInput{Segments: three, Copies: threeCopies, Limits: lim(-1, 150)},
			want: want{why: []Reason{LocalBytes, LocalBytes}, stop: StopWithinLimits}},
		{name: "-2: local.retention.ms follows retention.ms", in: LocalInput{Segments: three, Copies: threeCopies, Limits: lim(150, -1)},
			want: want{why: []Reason{LocalTime, LocalTime}, stop: StopWithinLimits}},
		{name: "-2 with unlimited retention: nothing goes", in: LocalInput{Segments: three, Copies: threeCopies, Limits: lim(-1, -1)},
			time: noTime, want: want{stop: StopWithinLimits}},
		{name: "a segment without a copy stays, and every later one", in: LocalInput{Segments: three,
			Copies: []remotelog.SegmentMetadata{threeCopies[0], threeCopies[2]}, Limits: localLim(0, 0)},
			want: want{why: []Reason{LocalBytes}, stop: StopNotCopied}},
		{name: "a copy of other size is no proof", in: LocalInput{Segments: three, Copies: []remotelog.SegmentMetadata{row(0, 9, 99, 0, 0)},
			Limits: localLim(0, 0)}, want: want{stop: StopNotCopied}},
		{name: "a copy of other offsets is no proof", in: LocalInput{Segments: three, Copies: []remotelog.SegmentMetadata{row(0, 8, 100, 0, 0)},
			Limits: localLim(0, 0)}, want: want{stop: StopNotCopied}},
		{name: "below the log start offset: goes uncopied", in: LocalInput{Segments: three, LogStartOffset: 20, Limits: localLim(-1, -1)},
			time: noTime, cover: []int{0, 0}, want: want{why: []Reason{BelowLogStart, BelowLogStart}, stop: StopNotCopied}},
		{name: "a log start offset inside a segment keeps it", in: LocalInput{Segments: three, LogStartOffset: 9, Limits: localLim(-1, -1)},
			time: noTime, want: want{stop: StopNotCopied}},
		{name: "size decides before time: its time is not read", in: LocalInput{Segments: three, Copies: threeCopies, Limits: localLim(150, 250)},
			time: func(t *testing.T) func(int) (int64, error) {
				return func(i int) (int64, error) {
					if i == 0 {
						t.Error("time of segment 0 read")
					}
					return byAge(i)
				}
			}, want: want{why: []Reason{LocalBytes, LocalTime}, stop: StopWithinLimits}},
		{name: "a time that cannot be read ends the plan", in: LocalInput{Segments: three, Copies: threeCopies, Limits: localLim(0, -1)},
			time: func(*testing.T) func(int) (int64, error) {
				return func(i int) (int64, error) {
					if i == 1 {
						return 0, errors.New("unreadable")
					}
					return 0, nil
				}
			}, want: want{why: []Reason{LocalTime}, stop: StopTimeUnknown, err: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.NowMs = now
			tc.in.SegmentTime = byAge
			if tc.time != nil {
				tc.in.SegmentTime = tc.time(t)
			}
			plan := PlanLocal(tc.in)
			var why []Reason
			for i, d := range plan.Delete {
				why = append(why, d.Why)
				if d.Segment != tc.in.Segments[i] {
					t.Errorf("delete %d is segment %+v, want %+v", i, d.Segment, tc.in.Segments[i])
				}
				n := 1
				if tc.cover != nil {
					n = tc.cover[i]
				}
				if len(d.Copies) != n || d.Exact != (n > 0) {
					t.Errorf("segment %d: proof %d copies (exact %t), want %d", d.Segment.Base, len(d.Copies), d.Exact, n)
				}
				for _, r := range d.Copies {
					if r.StartOffset != d.Segment.Base || r.EndOffset != d.Segment.End {
						t.Errorf("segment %d: proof %d-%d", d.Segment.Base, r.StartOffset, r.EndOffset)
					}
				}
			}
			if !reflect.DeepEqual(why, tc.want.why) || plan.Stop != tc.want.stop || (plan.Err != nil) != tc.want.err {
				t.Fatalf("deletes %v, stop %v, err %v; want %v, %v, err %t", why, plan.Stop, plan.Err, tc.want.why, tc.want.stop, tc.want.err)
			}
		})
	}
}

// TestPlanLocalCleanedCover: a segment the log cleaner rewrote after its
// copies goes on copies that cover all its offsets, only when they may
// differ from it (the topic compacts, or they were made compacted) and
// belong to the directory's incarnation.
func TestPlanLocalCleanedCover(t *testing.T) {
	s := []Segment{seg(0, 19, 150), seg(20, -1, 0)}
	halves := func(topicID string, compacted bool) []remotelog.SegmentMetadata {
		a, b := row(0, 9, 100, 0, 0), row(10, 19, 80, 0, 0)
		a.TopicID, b.TopicID, a.Compacted, b.Compacted = topicID, topicID, compacted, compacted
		return []remotelog.SegmentMetadata{a, b}
	}
	for _, tc := range []struct {
		name     string
		copies   []remotelog.SegmentMetadata
		topicID  string
		compacts bool
		covered  bool
	}{
		{"the topic compacts", halves("", false), "", true, true},
		{"the copies were made compacted", halves("", true), "", false, true},
		{"neither: no proof", halves("", false), "", false, false},
		{"same incarnation", halves("id1", false), "id1", true, true},
		{"another incarnation: no proof", halves("id0", true), "id1", true, false},
		{"a gap: no proof", halves("", true)[:1], "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := PlanLocal(LocalInput{Segments: s, Copies: tc.copies, Limits: localLim(-1, 0), TopicID: tc.topicID, Compacts: tc.compacts})
			if !tc.covered {
				if len(plan.Delete) != 0 || plan.Stop != StopNotCopied {
					t.Fatalf("plan %+v, want none", plan)
				}
				return
			}
			if len(plan.Delete) != 1 || plan.Delete[0].Exact || len(plan.Delete[0].Copies) != 2 || plan.Stop != StopActive {
				t.Fatalf("plan %+v, want the segment on two covering copies", plan)
			}
		})
	}
}

// TestCopiedExactly: a copy proves a local segment with the same offsets
// and the .log's size, or the size of the file it was made from when it
// left out a zero tail.
func TestCopiedExactly(t *testing.T) {
	tail := row(0, 9, 90, 0, 0)
	tail.LocalSizeInBytes = 100
	for _, tc := range []struct {
		name string
		r    remotelog.SegmentMetadata
		want bool
	}{
		{"same offsets and size", row(0, 9, 100, 0, 0), true},
		{"other size", row(0, 9, 90, 0, 0), false},
		{"zero tail left out", tail, true},
		{"other end", row(0, 10, 100, 0, 0), false},
		{"other start", row(1, 9, 100, 0, 0), false},
	} {
		if got := CopiedExactly([]remotelog.SegmentMetadata{tc.r}, seg(0, 9, 100)); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}
