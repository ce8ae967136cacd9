package retention

import (
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/saturate"
)

// LocalInput is what local retention decides from.
type LocalInput struct {
	// Segments are the local segments, oldest first, the active one last.
	Segments []Segment
	// Copies are the partition's finished, undamaged copies: a damaged
	// copy is no evidence for a local delete.
	Copies []remotelog.SegmentMetadata
	// LogStartOffset is the partition's log start offset: a segment wholly
	// below it goes whether copied or not.
	LogStartOffset int64
	Limits         Limits
	// TopicID is the incarnation the partition directory holds ("" when
	// unknown), and Compacts whether its cleanup.policy compacts now:
	// which copies may cover a segment the log cleaner rewrote
	// (Rewritable).
	TopicID  string
	Compacts bool
	NowMs    int64
	// SegmentTime returns the time (ms) local.retention.ms judges
	// Segments[i] by. It is called only for a segment that neither its
	// offsets nor local.retention.bytes decide, oldest first, and not past
	// the first segment that stays; its error ends the plan (LocalPlan.Err).
	SegmentTime func(i int) (int64, error)
}

// LocalDelete is one local segment that may go, and its proof.
type LocalDelete struct {
	Segment Segment
	Why     Reason // BelowLogStart, LocalBytes or LocalTime
	// Copies hold every record of the segment: its exact copies (Exact),
	// or copies of a segment the log cleaner rewrote since that together
	// cover its offsets (CleanedCover). nil for a segment below the log
	// start offset, which needs none. The deleter checks them in the
	// bucket right before the only local copy goes.
	Copies []remotelog.SegmentMetadata
	Exact  bool
}

// Stop says why a plan ended where it did.
type Stop uint8

const (
	// StopEnd: every segment may go (no active segment was given).
	StopEnd Stop = iota
	// StopActive: the next segment is the active one.
	StopActive
	// StopNotCopied: the next segment has no finished copy and is not
	// below the log start offset: it is never deleted.
	StopNotCopied
	// StopWithinLimits: the next segment breaches no local limit.
	StopWithinLimits
	// StopTimeUnknown: the next segment's time could not be read
	// (LocalPlan.Err).
	StopTimeUnknown
)

func (s Stop) String() string {
	switch s {
	case StopActive:
		return "active segment"
	case StopNotCopied:
		return "not copied"
	case StopWithinLimits:
		return "within the local limits"
	case StopTimeUnknown:
		return "time unknown"
	}
	return "end"
}

// LocalPlan is what local retention may delete: Delete[i] is
// Segments[i], oldest first, and Stop says why Segments[len(Delete)]
// stays.
type LocalPlan struct {
	Delete []LocalDelete
	Stop   Stop
	Err    error // SegmentTime's error, with StopTimeUnknown
}

// PlanLocal picks the oldest local segments that may go while local
// retention is breached. Rules, for each segment from the oldest:
//   - The active segment stays, and so does every segment after it.
//   - A segment wholly below the log start offset goes (BelowLogStart).
//   - Otherwise a segment goes only with a finished copy of exactly it,
//     or, for one the log cleaner may have rewritten since, copies
//     covering all its offsets; the first that has neither stays, and
//     so does everything after it.
//   - And only while the local log (every segment, the active one
//     included, less those going before it) is larger than
//     local.retention.bytes (LocalBytes), or its time is older than
//     local.retention.ms by more than the limit (LocalTime; -1: never,
//     -2: as retention.*). Size goes first: its time is read only when
//     size does not decide.
//
// Size retention deletes until the local log is within the limit, which
// is stricter than Kafka's UnifiedLog (it stops before the local log
// would drop below the limit); it only removes local files whose copies
// are finished, never data.
func PlanLocal(in LocalInput) LocalPlan {
	limitMs, limitBytes := in.Limits.local()
	var total int64
	for _, s := range in.Segments {
		total += s.Size
	}
	var plan LocalPlan
	for i, s := range in.Segments {
		if s.Active() {
			plan.Stop = StopActive
			return plan
		}
		d := LocalDelete{Segment: s}
		if s.End < in.LogStartOffset {
			d.Why = BelowLogStart
		} else if d.Copies = exactCopies(in.Copies, s); d.Copies != nil {
			d.Exact = true
		} else if d.Copies = CleanedCover(in.Copies, s, in.TopicID, in.Compacts); d.Copies == nil {
			plan.Stop = StopNotCopied // never delete what is not durably copied
			return plan
		}
		if d.Why == 0 && limitBytes >= 0 && total > limitBytes {
			d.Why = LocalBytes
		}
		if d.Why == 0 && limitMs >= 0 {
			ts, err := in.SegmentTime(i)
			if err != nil {
				plan.Stop, plan.Err = StopTimeUnknown, err
				return plan
			}
			if saturate.Older(ts, in.NowMs, limitMs) { // Long.MAX_VALUE: never
				d.Why = LocalTime
			}
		}
		if d.Why == 0 {
			plan.Stop = StopWithinLimits
			return plan
		}
		total -= s.Size
		plan.Delete = append(plan.Delete, d)
	}
	plan.Stop = StopEnd
	return plan
}
