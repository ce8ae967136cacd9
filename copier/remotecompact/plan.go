package remotecompact

import (
	"fmt"
	"math"

	"github.com/tierd/tierd/internal/remotelog"
)

// MaxSpan is the most offsets past its first one a run may span: an
// index entry's relative offset is an int32.
const MaxSpan = math.MaxInt32

// Settings are one topic's resolved remote compaction settings (the
// copier resolves them from tierd.yaml and the cluster's topic configs).
type Settings struct {
	SegmentBytes      int64   // Kafka's segment.bytes: the most .log bytes one merge reads
	DirtyRatio        float64 // Kafka's min.cleanable.dirty.ratio, from 0 to 1
	DeleteRetentionMs int64   // Kafka's delete.retention.ms, ms
}

// Run is a run of adjacent finished copies that one remote compaction
// merges into one copy.
type Run struct {
	Copies []remotelog.SegmentMetadata // oldest first, offsets contiguous
	// AtLogStart: the run starts with the partition's first live copy, so
	// no record of its keys lies before it and tombstones and transaction
	// markers past their delete horizon may go.
	AtLogStart bool
	Bytes      int64 // the copies' .log bytes
	Dirty      int64 // the bytes of copies no remote compaction wrote
}

// Start and End are the run's first and last offsets.
func (r Run) Start() int64 { return r.Copies[0].StartOffset }
func (r Run) End() int64   { return r.Copies[len(r.Copies)-1].EndOffset }

// IDs returns the segment ids of the run's copies, oldest first.
func (r Run) IDs() []remotelog.SegmentID {
	out := make([]remotelog.SegmentID, len(r.Copies))
	for i, m := range r.Copies {
		out[i] = m.ID
	}
	return out
}

// String names the run for logs.
func (r Run) String() string {
	return fmt.Sprintf("%d copies, offsets %d-%d, %d bytes (%d not compacted remotely)", len(r.Copies), r.Start(), r.End(), r.Bytes, r.Dirty)
}

// Plan chooses the run of copies to merge next among a
// partition's finished rows, or reports none.
//
// Rules:
//   - Only the rows remotelog.Supersede keeps take part (what readers
//     see), and only undamaged ones; a damaged copy ends a run. A kept
//     row that shares offsets with another kept row (partly overlapping
//     copies, or a newer shorter copy inside an older one's range, as an
//     unclean leader election leaves) takes no part either, so that the
//     merged copy supersedes exactly the copies it merged.
//   - Only copies wholly below localStart, the first offset still on
//     local disk: a local segment is deleted on the proof of its exact
//     copy (the copier's copiedExactly), which a merge would replace.
//   - Only copies at or past the log start offset in part: a copy wholly
//     below it is retention's to delete.
//   - The copies of a run follow each other with no gap (each starts
//     right after the previous one ends), belong to the same topic id and
//     were finished before nowMs (so the merged copy, finished later, is
//     remotelog.Newer than each).
//   - The .log bytes of a run sum to at most segmentBytes, and its
//     offsets span at most MaxSpan (an index entry's relative offset), as
//     Kafka's LogCleaner.groupSegmentsBySize groups segments.
//   - A run is worthwhile when it has two copies or more and the bytes of
//     its copies that no remote compaction wrote are at least dirtyRatio
//     of its bytes (min.cleanable.dirty.ratio).
//
// The window slides from the oldest copy: it grows while the copies fit,
// and when the run it holds is not worthwhile, its first copy leaves. The
// first worthwhile run wins, so merges start at the log start when they
// can. It costs O(n) for n rows.
func Plan(fin []remotelog.SegmentMetadata, localStart, logStart, nowMs int64, s Settings) (Run, bool) {
	rows := remotelog.Supersede(fin)
	// overlapped[k]: rows[k] shares offsets with another kept row (an
	// unclean leader election's diverged copies, or copies of two tierds).
	// Such a row takes no part, and no run may cover it: the merged copy
	// would supersede it without having read it, and retention would
	// delete it as superseded. Rows are sorted by start offset, so rows[k]
	// overlaps a later row iff the next one starts within it, and an
	// earlier one iff some earlier row ends at or past its start.
	overlapped := make([]bool, len(rows))
	reach := int64(math.MinInt64)
	for k, m := range rows {
		if m.StartOffset <= reach {
			overlapped[k] = true
		}
		if k+1 < len(rows) && rows[k+1].StartOffset <= m.EndOffset {
			overlapped[k] = true
		}
		reach = max(reach, m.EndOffset)
	}
	eligibleAt := func(k int) bool {
		m := rows[k]
		return !overlapped[k] && m.Damaged == "" && m.EndOffset < localStart && m.EndOffset >= logStart && m.EventTimestampMs < nowMs
	}
	follows := func(prev, next remotelog.SegmentMetadata) bool {
		return next.StartOffset == prev.EndOffset+1 && next.TopicID == prev.TopicID
	}
	first := 0 // the first eligible row: the log start of what remote compaction may touch
	for first < len(rows) && rows[first].EndOffset < logStart {
		first++
	}
	i, j := 0, 0 // the window is rows[i:j]
	var bytes, dirty int64
	for i < len(rows) {
		if j <= i {
			j, bytes, dirty = i, 0, 0
			if !eligibleAt(i) {
				i++
				continue
			}
		}
		for j < len(rows) && eligibleAt(j) && (j == i || follows(rows[j-1], rows[j])) &&
			bytes+rows[j].SizeInBytes <= s.SegmentBytes && rows[j].EndOffset-rows[i].StartOffset <= MaxSpan {
			bytes += rows[j].SizeInBytes
			if rows[j].CompactionOf == nil {
				dirty += rows[j].SizeInBytes
			}
			j++
		}
		if j-i >= 2 && float64(dirty) >= s.DirtyRatio*float64(bytes) {
			return Run{Copies: append([]remotelog.SegmentMetadata(nil), rows[i:j]...), AtLogStart: i == first, Bytes: bytes, Dirty: dirty}, true
		}
		if j == i { // rows[i] alone does not fit
			i++
			continue
		}
		bytes -= rows[i].SizeInBytes
		if rows[i].CompactionOf == nil {
			dirty -= rows[i].SizeInBytes
		}
		i++
	}
	return Run{}, false
}
