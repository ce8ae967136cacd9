package retention

import (
	"math"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/saturate"
)

// RemoteInput is what remote retention decides from.
type RemoteInput struct {
	// Copies are the partition's finished copies that readers see
	// (remotelog.Supersede's), oldest first.
	Copies []remotelog.SegmentMetadata
	// Segments are the local segments, oldest first: their bytes count
	// toward retention.bytes, and a copy wholly below the first one's base
	// offset is remote only.
	Segments       []Segment
	LogStartOffset int64
	Limits         Limits
	Policy         Policy
	// NowMs is the time; TimestampAfterMaxMs is
	// message.timestamp.after.max.ms (CopyTime).
	NowMs, TimestampAfterMaxMs int64
}

// RemoteDelete is one copy that breaches retention.
type RemoteDelete struct {
	Copy remotelog.SegmentMetadata
	Why  Reason // BelowLogStart, RetentionTime or RetentionBytes
	// LogStart is the log start offset once this copy and the ones before
	// it are gone: it moves there, durably, before their objects go.
	LogStart int64
}

// RemotePlan is what remote retention may delete, oldest first.
type RemotePlan struct {
	Delete []RemoteDelete
	// Future are the copies judged by their copy time because their max
	// timestamp is more than message.timestamp.after.max.ms ahead (a
	// producer's bad clock), for the caller to report.
	Future []remotelog.SegmentMetadata
}

// CopyTime returns the time retention.ms judges copy r by: its max
// timestamp, or the copy time (the row's event time, set when the copy
// finished) when no record has a timestamp or the max is Future. future
// reports the latter.
func CopyTime(r remotelog.SegmentMetadata, nowMs, afterMaxMs int64) (ms int64, future bool) {
	if r.MaxTimestampMs < 0 {
		return r.EventTimestampMs, false
	}
	if Future(r.MaxTimestampMs, nowMs, afterMaxMs) {
		return r.EventTimestampMs, true
	}
	return r.MaxTimestampMs, false
}

// PlanRemote picks the oldest copies that breach retention, each judged
// as if the ones before it were gone and the log start offset had moved
// past them (as when they go one at a time); the first copy that does not
// breach ends the plan. A copy breaches retention when:
//   - it lies wholly below the log start offset (BelowLogStart), or,
//     unless cleanup.policy is compact alone (Kafka keeps a compact-only
//     log whatever retention.* say),
//   - its CopyTime is older than retention.ms by more than the limit
//     (RetentionTime; -1: never), or
//   - it is remote only (wholly below the first local offset) and the log
//     without it still holds at least retention.bytes (RetentionBytes;
//     -1: never). The log is the local segments' bytes, the active one
//     included, plus the remote-only copies', each offset counted once;
//     Kafka's RemoteLogManager rule: the log is never cut below
//     retention.bytes.
func PlanRemote(in RemoteInput) RemotePlan {
	localStart, total := int64(math.MaxInt64), int64(0)
	if len(in.Segments) > 0 {
		localStart = in.Segments[0].Base
	}
	for _, s := range in.Segments {
		total += s.Size
	}
	for _, r := range in.Copies {
		if r.EndOffset < localStart {
			total += r.SizeInBytes
		}
	}
	var plan RemotePlan
	lso := in.LogStartOffset
	for _, r := range in.Copies {
		onlyRemote := r.EndOffset < localStart
		var why Reason
		switch {
		case r.EndOffset < lso:
			why = BelowLogStart
		case in.Policy.CompactOnly():
		default:
			ts, future := CopyTime(r, in.NowMs, in.TimestampAfterMaxMs)
			if future {
				plan.Future = append(plan.Future, r)
			}
			if saturate.Older(ts, in.NowMs, in.Limits.RetentionMs) {
				why = RetentionTime
			} else if in.Limits.RetentionBytes >= 0 && onlyRemote && total-r.SizeInBytes >= in.Limits.RetentionBytes {
				why = RetentionBytes
			}
		}
		if why == 0 {
			break
		}
		lso = max(lso, r.EndOffset+1)
		if onlyRemote {
			total -= r.SizeInBytes
		}
		plan.Delete = append(plan.Delete, RemoteDelete{Copy: r, Why: why, LogStart: lso})
	}
	return plan
}

// SupersededCopy is a finished copy that a newer one covers, and that
// copy: the proof, to be checked in the bucket right before Copy goes (a
// row alone, its objects lost since, is no proof).
type SupersededCopy struct {
	Copy, By remotelog.SegmentMetadata
}

// Superseded returns, among a partition's rows, the finished copies that
// readers no longer see (remotelog.Supersede drops them) and for which a
// newer finished row covers the whole range (supersedingRow), in rows'
// order.
func Superseded(rows []remotelog.SegmentMetadata) []SupersededCopy {
	var finished []remotelog.SegmentMetadata
	for _, r := range rows {
		if r.State == remotelog.CopySegmentFinished {
			finished = append(finished, r)
		}
	}
	live := map[remotelog.SegmentID]bool{}
	for _, r := range remotelog.Supersede(finished) {
		live[r.ID] = true
	}
	var out []SupersededCopy
	for _, r := range finished {
		if live[r.ID] {
			continue
		}
		if by, ok := supersedingRow(finished, r); ok {
			out = append(out, SupersededCopy{Copy: r, By: by})
		}
	}
	return out
}

// supersedingRow returns the newest finished row that covers r's whole
// range and is remotelog.Newer than r: the proof that r is superseded.
func supersedingRow(fin []remotelog.SegmentMetadata, r remotelog.SegmentMetadata) (remotelog.SegmentMetadata, bool) {
	var best remotelog.SegmentMetadata
	found := false
	for _, o := range fin {
		if o.ID != r.ID && o.StartOffset <= r.StartOffset && o.EndOffset >= r.EndOffset && remotelog.Newer(&o, &r) && (!found || remotelog.Newer(&o, &best)) {
			best, found = o, true
		}
	}
	return best, found
}
