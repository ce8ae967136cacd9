package retention

import (
	"github.com/tierd/tierd/internal/remotelog"
)

// Limits are a topic's retention settings, ms and bytes: -1 is unlimited;
// a local limit of -2 follows the total one (Kafka's local.retention.*
// default).
type Limits struct {
	RetentionMs, RetentionBytes           int64
	LocalRetentionMs, LocalRetentionBytes int64
}

// local returns the local limits with -2 resolved to the total ones.
func (l Limits) local() (ms, bytes int64) {
	ms, bytes = l.LocalRetentionMs, l.LocalRetentionBytes
	if ms == -2 {
		ms = l.RetentionMs
	}
	if bytes == -2 {
		bytes = l.RetentionBytes
	}
	return ms, bytes
}

// Policy is a topic's cleanup.policy: compact, delete or both.
type Policy struct {
	Compact, Delete bool
}

// CompactOnly reports a policy that compacts and does not delete: then
// retention.ms and retention.bytes delete no remote copy, as Kafka deletes
// nothing of a compact-only log by retention.
func (p Policy) CompactOnly() bool { return p.Compact && !p.Delete }

// Segment is a local segment as retention sees it: offsets [Base, End]
// and Size bytes of .log; End is -1 for the active segment.
type Segment struct {
	Base, End, Size int64
}

// Active reports the active segment, which retention never deletes.
func (s Segment) Active() bool { return s.End < 0 }

// Reason says why a segment or copy may go.
type Reason uint8

const (
	// BelowLogStart: it lies wholly below the log start offset.
	BelowLogStart Reason = iota + 1
	// LocalBytes: the local log is larger than local.retention.bytes.
	LocalBytes
	// LocalTime: its time is older than local.retention.ms.
	LocalTime
	// RetentionBytes: the log without it still holds retention.bytes.
	RetentionBytes
	// RetentionTime: its time is older than retention.ms.
	RetentionTime
	// SupersededBy: a newer finished copy covers its whole range.
	SupersededBy
)

func (r Reason) String() string {
	switch r {
	case BelowLogStart:
		return "below the log start offset"
	case LocalBytes:
		return "over local.retention.bytes"
	case LocalTime:
		return "older than local.retention.ms"
	case RetentionBytes:
		return "over retention.bytes"
	case RetentionTime:
		return "older than retention.ms"
	case SupersededBy:
		return "superseded"
	}
	return "none"
}

// copiedExactly reports whether finished row r is a copy of exactly local
// segment s: same offsets, and the .log's size is the copy's, or the size
// of the file a copy that left out a zero tail was made from
// (LocalSizeInBytes).
func copiedExactly(r remotelog.SegmentMetadata, s Segment) bool {
	sameSize := r.SizeInBytes == s.Size || (r.LocalSizeInBytes > 0 && r.LocalSizeInBytes == s.Size)
	return r.StartOffset == s.Base && r.EndOffset == s.End && sameSize
}

// CopiedExactly reports whether one of the finished rows is a copy of
// exactly this local segment (copiedExactly). Only such a copy allows the
// local segment to be deleted; a row restored from foreign or older
// manifests with other contents, or a file that changed size since its
// copy, never does.
func CopiedExactly(fin []remotelog.SegmentMetadata, s Segment) bool {
	for _, r := range fin {
		if copiedExactly(r, s) {
			return true
		}
	}
	return false
}

// exactCopies returns the rows of fin that are copies of exactly s, in
// fin's order; nil when none is.
func exactCopies(fin []remotelog.SegmentMetadata, s Segment) []remotelog.SegmentMetadata {
	var out []remotelog.SegmentMetadata
	for _, r := range fin {
		if copiedExactly(r, s) {
			out = append(out, r)
		}
	}
	return out
}

// Rewritable reports whether a finished copy may differ in size from the
// local segment of its offsets because the log cleaner rewrote that
// segment: the topic compacts now (compacts), or the copy was made
// compacted; and the copy belongs to the incarnation the directory holds
// (topicID, when both ids are known).
func Rewritable(r remotelog.SegmentMetadata, topicID string, compacts bool) bool {
	if topicID != "" && r.TopicID != "" && topicID != r.TopicID {
		return false
	}
	return compacts || r.Compacted
}

// CleanedCover returns finished copies among fin (oldest first) that
// together hold every offset of local segment s, each one a copy the
// cleaner may have rewritten the local segment after (Rewritable): the
// local segment, however often cleaned since, holds no record they do not
// hold. nil when no such copies cover s. It costs O(len(fin)) per copy
// returned.
func CleanedCover(fin []remotelog.SegmentMetadata, s Segment, topicID string, compacts bool) []remotelog.SegmentMetadata {
	var out []remotelog.SegmentMetadata
	next := s.Base
	for next <= s.End {
		best := -1
		for i, r := range fin {
			if r.Contains(next) && Rewritable(r, topicID, compacts) && (best < 0 || r.EndOffset > fin[best].EndOffset) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		out = append(out, fin[best])
		next = fin[best].EndOffset + 1
	}
	return out
}

// Future reports whether timestamp ts (ms) is more than afterMaxMs
// (message.timestamp.after.max.ms) ahead of nowMs: a producer's bad clock,
// which must not pin a segment forever. It cannot overflow, for Kafka's
// Long.MAX_VALUE settings too.
func Future(ts, nowMs, afterMaxMs int64) bool {
	return ts-nowMs > afterMaxMs && nowMs <= ts
}
