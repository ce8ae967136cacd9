package retention

import (
	"reflect"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// TestPlanRemote: which copies remote retention deletes, oldest first,
// why, and where the log start offset moves.
func TestPlanRemote(t *testing.T) {
	const now, afterMax = 1_000_000, 1000
	// Four copies of 100 bytes with max timestamps 400, 300, 200 and 100
	// ms old; the last one's segment is still local, with the active one.
	copies := []remotelog.SegmentMetadata{row(0, 9, 100, now-400, 0), row(10, 19, 100, now-300, 0), row(20, 29, 100, now-200, 0), row(30, 39, 100, now-100, 0)}
	local := []Segment{seg(30, 39, 100), seg(40, -1, 50)}
	future := row(0, 9, 100, now+afterMax+1, now-400) // a producer's clock far ahead
	ahead := row(0, 9, 100, now+afterMax, now-400)    // exactly message.timestamp.after.max.ms ahead
	noTs := row(0, 9, 100, -1, now-400)
	type del struct {
		why      Reason
		logStart int64
	}
	cases := []struct {
		name   string
		in     RemoteInput
		want   []del
		future int
	}{
		{name: "time: older than retention.ms goes, exactly as old stays", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(300, -1)},
			want: []del{{RetentionTime, 10}}},
		{name: "time: the oldest first, the log start offset past each", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(150, -1)},
			want: []del{{RetentionTime, 10}, {RetentionTime, 20}, {RetentionTime, 30}}},
		{name: "time: a copy still local goes by time too", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(0, -1)},
			want: []del{{RetentionTime, 10}, {RetentionTime, 20}, {RetentionTime, 30}, {RetentionTime, 40}}},
		{name: "time: no max timestamp: the copy time", in: RemoteInput{Copies: []remotelog.SegmentMetadata{noTs}, Limits: lim(300, -1)},
			want: []del{{RetentionTime, 10}}},
		{name: "time: a max timestamp far ahead: the copy time, reported", in: RemoteInput{Copies: []remotelog.SegmentMetadata{future}, Limits: lim(300, -1)},
			want: []del{{RetentionTime, 10}}, future: 1},
		{name: "time: exactly message.timestamp.after.max.ms ahead counts", in: RemoteInput{Copies: []remotelog.SegmentMetadata{ahead}, Limits: lim(300, -1)}},
		{name: "time: a far-ahead max timestamp is reported with retention.ms -1", in: RemoteInput{Copies: []remotelog.SegmentMetadata{future}, Limits: lim(-1, -1)},
			future: 1},
		// The log: local 150 + remote-only 300 = 450 (the still-local
		// copy's bytes count once).
		{name: "size: remote-only copies go while the log without each holds the limit", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(-1, 250)},
			want: []del{{RetentionBytes, 10}, {RetentionBytes, 20}}},
		{name: "size: the log without the copy exactly at the limit: it goes", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(-1, 350)},
			want: []del{{RetentionBytes, 10}}},
		{name: "size: one byte short: it stays", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(-1, 351)}},
		{name: "size: a copy still local never goes by size", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(-1, 0)},
			want: []del{{RetentionBytes, 10}, {RetentionBytes, 20}, {RetentionBytes, 30}}},
		{name: "size: without local segments every copy is remote only", in: RemoteInput{Copies: copies, Limits: lim(-1, 200)},
			want: []del{{RetentionBytes, 10}, {RetentionBytes, 20}}},
		{name: "size: a copy reaching into the first local segment is not remote only", in: RemoteInput{Copies: copies[:2],
			Segments: []Segment{seg(9, 19, 100), seg(20, -1, 0)}, Limits: lim(-1, 0)}},
		{name: "size: its bytes count once, as the local segment's", in: RemoteInput{Copies: []remotelog.SegmentMetadata{row(0, 4, 100, now, 0),
			row(5, 9, 100, now, 0)}, Segments: []Segment{seg(9, 19, 100), seg(20, -1, 0)}, Limits: lim(-1, 150)}},
		{name: "size: the same one byte lower", in: RemoteInput{Copies: []remotelog.SegmentMetadata{row(0, 4, 100, now, 0),
			row(5, 9, 100, now, 0)}, Segments: []Segment{seg(9, 19, 100), seg(20, -1, 0)}, Limits: lim(-1, 100)}, want: []del{{RetentionBytes, 5}}},
		{name: "-1: unlimited keeps all", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(-1, -1)}},
		{name: "log start offset moved: the copies wholly below it go", in: RemoteInput{Copies: copies, Segments: local, LogStartOffset: 25, Limits: lim(-1, -1)},
			want: []del{{BelowLogStart, 25}, {BelowLogStart, 25}}},
		{name: "log start offset at a copy's start: it stays", in: RemoteInput{Copies: copies, Segments: local, LogStartOffset: 10, Limits: lim(-1, -1)},
			want: []del{{BelowLogStart, 10}}},
		{name: "below the log start, then by time", in: RemoteInput{Copies: copies, Segments: local, LogStartOffset: 10, Limits: lim(250, -1)},
			want: []del{{BelowLogStart, 10}, {RetentionTime, 20}}},
		{name: "compact only: retention.* delete nothing", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(0, 0), Policy: Policy{Compact: true}}},
		{name: "compact only: below the log start still goes", in: RemoteInput{Copies: copies, Segments: local, LogStartOffset: 20, Limits: lim(0, 0),
			Policy: Policy{Compact: true}}, want: []del{{BelowLogStart, 20}, {BelowLogStart, 20}}},
		{name: "compact only: no time judged, none reported", in: RemoteInput{Copies: []remotelog.SegmentMetadata{future}, Limits: lim(0, 0),
			Policy: Policy{Compact: true}}},
		{name: "compact,delete: retention.* delete", in: RemoteInput{Copies: copies, Segments: local, Limits: lim(350, -1), Policy: Policy{Compact: true, Delete: true}},
			want: []del{{RetentionTime, 10}}},
		{name: "the first copy that stays ends the plan", in: RemoteInput{Copies: []remotelog.SegmentMetadata{copies[1], copies[0]}, Limits: lim(350, -1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.NowMs, tc.in.TimestampAfterMaxMs = now, afterMax
			plan := PlanRemote(tc.in)
			var got []del
			for i, d := range plan.Delete {
				got = append(got, del{d.Why, d.LogStart})
				if d.Copy.ID != tc.in.Copies[i].ID {
					t.Errorf("delete %d is copy %d-%d, want the %dth", i, d.Copy.StartOffset, d.Copy.EndOffset, i)
				}
			}
			if !reflect.DeepEqual(got, tc.want) || len(plan.Future) != tc.future {
				t.Fatalf("deletes %v, %d reported ahead; want %v, %d", got, len(plan.Future), tc.want, tc.future)
			}
		})
	}
}

// TestSuperseded: a finished copy goes when a newer finished copy covers
// its whole range, named as the proof; the newest such copy is named.
func TestSuperseded(t *testing.T) {
	at := func(start, end, event int64) remotelog.SegmentMetadata { return row(start, end, 100, 0, event) }
	damaged := func(r remotelog.SegmentMetadata) remotelog.SegmentMetadata { r.Damaged = ".log"; return r }
	started := func(r remotelog.SegmentMetadata) remotelog.SegmentMetadata {
		r.State = remotelog.CopySegmentStarted
		return r
	}
	a, b, c := at(0, 9, 1), at(0, 19, 2), at(0, 29, 3)
	lost := damaged(at(0, 9, 5)) // a's offsets, copied later and found damaged
	for _, tc := range []struct {
		name string
		rows []remotelog.SegmentMetadata
		want [][2]remotelog.SegmentID // copy, by
	}{
		{"a newer copy covering it", []remotelog.SegmentMetadata{a, b}, [][2]remotelog.SegmentID{{a.ID, b.ID}}},
		{"the newest covering copy is the proof", []remotelog.SegmentMetadata{a, b, c}, [][2]remotelog.SegmentID{{a.ID, c.ID}, {b.ID, c.ID}}},
		{"an older covering copy supersedes nothing", []remotelog.SegmentMetadata{at(0, 19, 1), at(0, 9, 2)}, nil},
		{"partly overlapping copies are both kept", []remotelog.SegmentMetadata{at(0, 9, 1), at(5, 19, 2)}, nil},
		{"a damaged copy is no proof", []remotelog.SegmentMetadata{a, damaged(b)}, nil},
		{"a damaged copy goes once copied again", []remotelog.SegmentMetadata{lost, a}, [][2]remotelog.SegmentID{{lost.ID, a.ID}}},
		{"an unfinished copy is no proof", []remotelog.SegmentMetadata{a, started(b)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [][2]remotelog.SegmentID
			for _, sc := range Superseded(tc.rows) {
				got = append(got, [2]remotelog.SegmentID{sc.Copy.ID, sc.By.ID})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("superseded %v, want %v", got, tc.want)
			}
		})
	}
}
