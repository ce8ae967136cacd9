package statuspage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

func row(start, end int64, state remotelog.SegmentState) remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t", Partition: 0}, ID: remotelog.NewSegmentID(),
		StartOffset: start, EndOffset: end, SizeInBytes: 1000, State: state}
}

func status(state remotelog.TierState, reason remotelog.WaitReason, logStart, hw int64) remotelog.PartitionStatus {
	return remotelog.PartitionStatus{Topic: "t", State: state, Reason: reason, LogStartOffset: logStart, HighWatermark: hw, HighestTieredOffset: -1}
}

// boxesText is "state start-end[*]" per box, * marking Next.
func boxesText(tl Timeline) string {
	var out []string
	for _, b := range tl.Boxes {
		s := fmt.Sprintf("%s %d-%d", b.State, b.Start, b.End)
		if b.Next {
			s += "*"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// Local segments and metadata rows are joined by base offset into one box
// each, coloured by where their offsets are.
func TestBuildTimeline(t *testing.T) {
	local := []localSegment{{0, 1000}, {100, 1000}, {200, 1000}, {300, 500}}
	damaged := row(100, 199, remotelog.CopySegmentFinished)
	damaged.Damaged = "the .log is missing"
	for _, tc := range []struct {
		name  string
		st    remotelog.PartitionStatus
		local []localSegment
		rows  []remotelog.SegmentMetadata
		want  string
	}{
		{"waiting: first uncopied segment marked", status(remotelog.TierWaiting, remotelog.WaitNotInCheckpoint, 0, -1), local,
			[]remotelog.SegmentMetadata{row(0, 99, remotelog.CopySegmentFinished)},
			"both 0-99, local 100-199*, local 200-299, active 300--1"},
		{"remote only after local retention", status(remotelog.TierUpToDate, "", 0, 350), local[3:],
			[]remotelog.SegmentMetadata{row(0, 99, remotelog.CopySegmentFinished), row(100, 199, remotelog.CopySegmentFinished), row(200, 299, remotelog.CopySegmentFinished)},
			"remote 0-99, remote 100-199, remote 200-299, active 300--1"},
		{"deletes in flight and below the log start offset", status(remotelog.TierUpToDate, "", 100, -1), local[2:],
			[]remotelog.SegmentMetadata{row(0, 99, remotelog.CopySegmentFinished), row(100, 199, remotelog.DeleteSegmentStarted),
				row(100, 199, remotelog.DeleteSegmentFinished), row(200, 299, remotelog.CopySegmentFinished)},
			"deleting 0-99, deleting 100-199, both 200-299, active 300--1"},
		{"copy in flight, a newer finished copy beats a dead one", func() remotelog.PartitionStatus {
			st := status(remotelog.TierCopying, "", 0, -1)
			st.Copying = &remotelog.CopyProgress{BaseOffset: 200, EndOffset: 299}
			return st
		}(), local, []remotelog.SegmentMetadata{row(0, 99, remotelog.DeleteSegmentStarted), row(0, 99, remotelog.CopySegmentFinished),
			row(100, 199, remotelog.CopySegmentStarted)},
			"both 0-99, copying 100-199, copying 200-299, active 300--1"},
		{"a damaged copy does not count", status(remotelog.TierWaiting, remotelog.WaitCopyFailed, 0, -1), local[1:],
			[]remotelog.SegmentMetadata{damaged}, "local 100-199*, local 200-299, active 300--1"},
		{"offsets on neither tier", status(remotelog.TierUpToDate, "", 0, -1), local[3:],
			[]remotelog.SegmentMetadata{row(0, 99, remotelog.CopySegmentFinished), row(200, 299, remotelog.CopySegmentFinished)},
			"remote 0-99, gap 100-199, remote 200-299, active 300--1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := buildTimeline(tc.st, tc.local, tc.rows, 100)
			if got := boxesText(tl); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if tl.Name != "t-0" || tl.First != tl.Boxes[0].Start {
				t.Errorf("name %q first %d", tl.Name, tl.First)
			}
		})
	}
}

// Boxes are sized by their offsets; an active segment by the high
// watermark, else by its bytes at the other segments' offsets per byte.
func TestTimelineSizes(t *testing.T) {
	rows := []remotelog.SegmentMetadata{row(0, 99, remotelog.CopySegmentFinished), row(100, 399, remotelog.CopySegmentFinished)}
	tl := buildTimeline(status(remotelog.TierUpToDate, "", 0, 450), []localSegment{{400, 10}}, rows, 100)
	if g := []int64{tl.Boxes[0].Grow, tl.Boxes[1].Grow, tl.Boxes[2].Grow}; g[0] != 100 || g[1] != 300 || g[2] != 50 {
		t.Errorf("grow by offsets and high watermark: %v", g)
	}
	tl = buildTimeline(status(remotelog.TierUpToDate, "", 0, -1), []localSegment{{400, 500}}, rows, 100) // 400 offsets per 2000 bytes
	if g := tl.Boxes[2].Grow; g != 100 {
		t.Errorf("active segment of 500 bytes: grow %d, want 100", g)
	}
	tl = buildTimeline(status(remotelog.TierUpToDate, "", 0, -1), []localSegment{{0, 0}}, nil, 100)
	if g := tl.Boxes[0].Grow; g != 1 || tl.Last != -1 {
		t.Errorf("empty active segment alone: grow %d, last %d", g, tl.Last)
	}
}

// Only the newest boxes are drawn beyond the limit; the rest are counted.
func TestTimelineLimit(t *testing.T) {
	var rows []remotelog.SegmentMetadata
	for i := int64(0); i < 10; i++ {
		rows = append(rows, row(i*10, i*10+9, remotelog.CopySegmentFinished))
	}
	tl := buildTimeline(status(remotelog.TierRemoteOnly, "", 0, -1), nil, rows, 4)
	if len(tl.Boxes) != 4 || tl.Omitted != 6 || tl.First != 60 || tl.Last != 99 {
		t.Fatalf("%d boxes, %d omitted, %d-%d", len(tl.Boxes), tl.Omitted, tl.First, tl.Last)
	}
}

// A scheduled partition deletion is drawn as pending delete.
func TestDeletionTimeline(t *testing.T) {
	d := remotelog.PartitionDeletion{TopicPartition: remotelog.TopicPartition{Topic: "t"}, Reason: remotelog.ReasonOperator,
		Segments: []remotelog.SegmentMetadata{row(0, 99, remotelog.CopySegmentFinished), row(100, 199, remotelog.CopySegmentFinished)}}
	if got := boxesText(deletionTimeline(d, 10)); got != "deleting 0-99, deleting 100-199" {
		t.Fatal(got)
	}
}

// listLocal lists live .log files only, by base offset; a gone directory
// has none.
func TestListLocal(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int{"00000000000000000200.log": 7, "00000000000000000000.log": 3, "00000000000000000000.index": 8,
		"00000000000000000100.log.deleted": 5, "leader-epoch-checkpoint": 1} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	segs, err := listLocal(dir)
	if err != nil || len(segs) != 2 || segs[0] != (localSegment{0, 3}) || segs[1] != (localSegment{200, 7}) {
		t.Fatalf("%v %v", segs, err)
	}
	if segs, err := listLocal(filepath.Join(dir, "gone")); err != nil || segs != nil {
		t.Fatalf("gone dir: %v %v", segs, err)
	}
}
