package statuspage

import (
	"fmt"
	"os"
	"sort"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// SegState is where one segment's offsets are, as the timeline colours it.
type SegState string

// Segment states on the timeline, in the legend's order.
const (
	// SegActive: the active segment, on local disk only; it is copied
	// once the broker rolls it.
	SegActive SegState = "active"
	// SegLocal: a rolled segment on local disk only, waiting for its copy.
	SegLocal SegState = "local"
	// SegCopying: a copy is in flight (COPY_SEGMENT_STARTED).
	SegCopying SegState = "copying"
	// SegBoth: on local disk and with a finished copy.
	SegBoth SegState = "both"
	// SegRemote: a finished copy only; local retention removed the files.
	SegRemote SegState = "remote"
	// SegDeleting: to be deleted and not yet gone: a row in
	// DELETE_SEGMENT_STARTED, a copy or local segment wholly below the log
	// start offset, or a copy of a partition whose deletion is scheduled.
	SegDeleting SegState = "deleting"
	// SegGap: offsets between two segments that neither tier holds
	// (deleted locally before they were copied).
	SegGap SegState = "gap"
)

// segStates lists every SegState with its legend text.
var segStates = []struct {
	State SegState
	Text  string
}{
	{SegActive, "active segment (local only)"},
	{SegLocal, "rolled, local only (waits for its copy)"},
	{SegCopying, "copying"},
	{SegBoth, "local and remote"},
	{SegRemote, "remote only"},
	{SegDeleting, "pending delete"},
	{SegGap, "on neither tier"},
}

// Box is one segment (or gap) on a partition's timeline.
type Box struct {
	State SegState
	// Start and End are the first and last offsets, inclusive; End is -1
	// for the active segment when the high watermark does not bound it.
	Start, End int64
	// Bytes is the .log's size (the copy's when there is no local file).
	Bytes int64
	// Grow is the box's share of the bar: its number of offsets, or an
	// estimate from its size for an active segment of unknown end.
	Grow int64
	// Next marks the first segment a waiting partition does not copy.
	Next bool
	// Note says more: the remote row's state, a damaged copy, why it waits.
	Note string
}

// Timeline is one partition's segments, oldest first.
type Timeline struct {
	Name  string // "<topic>-<partition>"
	Label string // what the partition is doing, in a few words
	Boxes []Box
	// Omitted counts the oldest boxes left out beyond Config.TimelineSegments.
	Omitted int
	// First and Last are the offsets at the bar's two ends (-1: none).
	First, Last int64
}

// localSegment is a live .log file of a partition directory.
type localSegment struct {
	base, size int64
}

// listLocal returns the live segments of a partition directory, by base
// offset. A directory that is gone has none.
func listLocal(dir string) ([]localSegment, error) {
	if dir == "" {
		return nil, nil
	}
	d, err := kafkalog.ListSegmentDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]localSegment, len(d.Segments))
	for i, f := range d.Segments {
		out[i] = localSegment{base: f.BaseOffset, size: f.Info.Size()}
	}
	return out, nil
}

// rowRank orders the rows of one offset range: the row that says most
// about where the offsets are first.
func rowRank(r remotelog.SegmentMetadata) int {
	switch {
	case r.State == remotelog.CopySegmentFinished && r.Damaged == "":
		return 0
	case r.State == remotelog.CopySegmentStarted:
		return 1
	case r.State == remotelog.CopySegmentFinished:
		return 2
	}
	return 3
}

// buildTimeline joins a partition's local segments and metadata rows into
// boxes by base offset. st gives the log start offset, the high watermark
// and the copy in flight; rows in DELETE_SEGMENT_FINISHED are gone and
// left out. limit bounds the boxes kept (the newest).
func buildTimeline(st remotelog.PartitionStatus, local []localSegment, rows []remotelog.SegmentMetadata, limit int) Timeline {
	byStart := map[int64]remotelog.SegmentMetadata{}
	for _, r := range rows {
		if r.State == remotelog.DeleteSegmentFinished {
			continue
		}
		if cur, ok := byStart[r.StartOffset]; !ok || rowRank(r) < rowRank(cur) {
			byStart[r.StartOffset] = r
		}
	}
	var boxes []Box
	for i, s := range local {
		b := Box{Start: s.base, End: -1, Bytes: s.size}
		active := i == len(local)-1
		if !active {
			b.End = local[i+1].base - 1
		}
		r, remote := byStart[s.base]
		delete(byStart, s.base)
		switch {
		case remote && deleting(r, st.LogStartOffset):
			b.State, b.Note = SegDeleting, "copy "+r.State.String()
		case st.Copying != nil && st.Copying.BaseOffset == s.base, remote && r.State == remotelog.CopySegmentStarted:
			b.State, b.Note = SegCopying, "copy in flight"
		case remote && r.State == remotelog.CopySegmentFinished && r.Damaged == "":
			b.State, b.Note = SegBoth, "copy COPY_SEGMENT_FINISHED"
		case !active && st.LogStartOffset >= 0 && b.End < st.LogStartOffset:
			b.State, b.Note = SegDeleting, "below the log start offset"
		case active:
			b.State, b.Note = SegActive, "active segment"
		default:
			b.State, b.Note = SegLocal, "no finished copy"
		}
		if remote && r.Damaged != "" {
			b.Note += "; damaged copy: " + r.Damaged
		}
		boxes = append(boxes, b)
	}
	for _, r := range byStart {
		b := Box{Start: r.StartOffset, End: r.EndOffset, Bytes: r.SizeInBytes, State: SegRemote, Note: "copy " + r.State.String()}
		switch {
		case deleting(r, st.LogStartOffset):
			b.State = SegDeleting
		case r.State == remotelog.CopySegmentStarted:
			b.State = SegCopying
		}
		if r.Damaged != "" {
			b.Note += "; damaged: " + r.Damaged
		}
		boxes = append(boxes, b)
	}
	sort.Slice(boxes, func(i, j int) bool { return boxes[i].Start < boxes[j].Start })
	boxes = withGaps(boxes)
	sizeBoxes(boxes, st.HighWatermark)
	markNext(boxes, st)
	tl := Timeline{Name: fmt.Sprintf("%s-%d", st.Topic, st.Partition), First: -1, Last: -1}
	if limit > 0 && len(boxes) > limit {
		tl.Omitted = len(boxes) - limit
		boxes = boxes[len(boxes)-limit:]
	}
	tl.Boxes = boxes
	if len(boxes) > 0 {
		tl.First, tl.Last = boxes[0].Start, boxes[len(boxes)-1].End
	}
	return tl
}

// deleting reports whether a row is on its way out: its delete started,
// or it is a copy wholly below the log start offset (Kafka's
// RemoteDeleteLag counts the same).
func deleting(r remotelog.SegmentMetadata, logStart int64) bool {
	return r.State == remotelog.DeleteSegmentStarted || (r.State == remotelog.CopySegmentFinished && r.EndOffset < logStart)
}

// withGaps inserts a gap box between two boxes that leave offsets out.
func withGaps(boxes []Box) []Box {
	out := make([]Box, 0, len(boxes))
	for i, b := range boxes {
		if i > 0 {
			prev := boxes[i-1]
			if prev.End >= 0 && b.Start > prev.End+1 {
				out = append(out, Box{State: SegGap, Start: prev.End + 1, End: b.Start - 1, Note: "no copy and no local segment holds these offsets"})
			}
		}
		out = append(out, b)
	}
	return out
}

// sizeBoxes sets each box's share of the bar to its offsets. An active
// segment ends at the high watermark when that is above its base;
// otherwise its share is estimated from its size at the other segments'
// offsets per byte (at least 1).
func sizeBoxes(boxes []Box, hw int64) {
	var offs, bytes int64
	for _, b := range boxes {
		if b.End >= 0 && b.State != SegGap && b.Bytes > 0 {
			offs += b.End - b.Start + 1
			bytes += b.Bytes
		}
	}
	for i := range boxes {
		b := &boxes[i]
		switch {
		case b.End >= 0:
			b.Grow = b.End - b.Start + 1
		case hw > b.Start:
			b.Grow = hw - b.Start
		case bytes > 0:
			b.Grow = int64(float64(b.Bytes) * float64(offs) / float64(bytes))
		}
		b.Grow = max(b.Grow, 1)
	}
}

// markNext marks, for a waiting partition, the first rolled local-only
// segment at or above the log start offset: the one it does not copy.
func markNext(boxes []Box, st remotelog.PartitionStatus) {
	if st.State != remotelog.TierWaiting {
		return
	}
	for i := range boxes {
		b := &boxes[i]
		if b.State == SegLocal {
			b.Next = true
			b.Note = fmt.Sprintf("next to copy; waits: %s", st.Reason)
			return
		}
	}
}

// deletionTimeline draws a scheduled whole-partition deletion: every copy
// it holds is pending delete.
func deletionTimeline(d remotelog.PartitionDeletion, limit int) Timeline {
	st := remotelog.PartitionStatus{Topic: d.TopicPartition.Topic, Partition: d.TopicPartition.Partition, LogStartOffset: -1, HighWatermark: -1}
	tl := buildTimeline(st, nil, d.Segments, limit)
	for i := range tl.Boxes {
		if tl.Boxes[i].State != SegGap {
			tl.Boxes[i].State = SegDeleting
			tl.Boxes[i].Note = "scheduled partition deletion (" + string(d.Reason) + ")"
		}
	}
	return tl
}
