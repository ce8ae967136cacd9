package copier

import (
	"strings"

	"github.com/tierd/tierd/internal/remotelog"
)

// Damage reasons. A copy marked for missing objects is checked again, and
// cleared when found whole; one whose objects differ from its manifest
// stays marked (tierd verify reports it).
const (
	damagedMissing  = "missing from the bucket: "
	damagedChecksum = "checksum mismatch: "
)

// recheckable reports whether a damage reason is one a later check may
// clear: objects found missing (by auditor.checkCopy, or a manifest by the
// reconciliation of a partition taken over).
func recheckable(reason string) bool {
	return strings.HasPrefix(reason, damagedMissing) || strings.HasPrefix(reason, "manifest missing")
}

// undamaged returns the rows whose objects no check found missing.
func undamaged(rows []remotelog.SegmentMetadata) []remotelog.SegmentMetadata {
	out := make([]remotelog.SegmentMetadata, 0, len(rows))
	for _, r := range rows {
		if r.Damaged == "" {
			out = append(out, r)
		}
	}
	return out
}

// damagedExactly reports whether the only copies of a local segment are
// damaged copies of exactly it: the segment is to be copied again.
func damagedExactly(fin []remotelog.SegmentMetadata, s localSegment) bool {
	found := false
	for _, r := range fin {
		if r.StartOffset <= s.base && r.EndOffset >= s.end {
			if r.Damaged == "" {
				return false
			}
			found = found || copiedExactly([]remotelog.SegmentMetadata{r}, s)
		}
	}
	return found
}
