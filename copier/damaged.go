package copier

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// maxSuspects bounds the copies queued by readers for a check.
const maxSuspects = 1024

// SuspectCopy queues a finished copy for a check of its objects on the
// next pass: the remote read engine calls it when a read of the copy found an
// object missing (DATA_LOSS). It never blocks; past maxSuspects queued
// copies it drops the report.
func (c *Copier) SuspectCopy(meta remotelog.SegmentMetadata) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if len(c.suspects) < maxSuspects {
		c.suspects[meta.ID] = meta
	}
}

// sampleDue reports whether a round of sampled copy checks is due (at
// most one per CopyCheckIntervalMs) and, when it is, starts the interval
// over.
func (c *Copier) sampleDue() bool {
	now := c.now()
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if !c.lastSample.IsZero() && now.Sub(c.lastSample).Milliseconds() < c.cfg.CopyCheckIntervalMs {
		return false
	}
	c.lastSample = now
	return true
}

// checkCopies checks, once per pass, the copies readers reported and, at
// most once per CopyCheckIntervalMs, CopyChecksPerPass more taken in turn
// across the partitions this tierd tiers (one copy of each of the next partitions, and that partition's
// first copy marked damaged for missing objects, if any), so every copy
// is looked at now and then for the cost of a few requests per pass. A
// copy with an object missing is marked damaged (see checkCopy); a
// damaged copy found whole again is cleared.
func (c *Copier) checkCopies(ctx context.Context, owned []remotelog.TopicPartition) error {
	c.stateMu.Lock()
	todo := make([]remotelog.SegmentMetadata, 0, len(c.suspects)+c.cfg.CopyChecksPerPass)
	for _, m := range c.suspects {
		todo = append(todo, m)
	}
	c.suspects = map[remotelog.SegmentID]remotelog.SegmentMetadata{}
	c.stateMu.Unlock()
	if n := len(owned); n > 0 && c.cfg.CopyChecksPerPass > 0 && c.sampleDue() {
		sort.Slice(owned, func(i, j int) bool { return owned[i].String() < owned[j].String() })
		for k := 0; k < min(c.cfg.CopyChecksPerPass, n); k++ {
			c.checkCursor++
			tp := owned[c.checkCursor%n]
			fin, err := c.store.FinishedSegments(tp)
			if err != nil || len(fin) == 0 {
				continue
			}
			c.stateMu.Lock()
			i := c.copyCursor[tp] % len(fin)
			c.copyCursor[tp] = i + 1
			c.stateMu.Unlock()
			todo = append(todo, fin[i])
			for j, r := range fin {
				if j != i && recheckable(r.Damaged) {
					todo = append(todo, r)
					break
				}
			}
		}
	}
	var errs []error
	for _, m := range todo {
		if err := c.checkCopy(ctx, m); err != nil {
			errs = append(errs, fmt.Errorf("%s: check copy %s: %w", m.TopicPartition, m.ID, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d copy checks failed: %w", len(errs), errs[0])
	}
	return nil
}

// Damage reasons. A copy marked for missing objects is checked again, and
// cleared when found whole; one whose objects differ from its manifest
// stays marked (tierd verify reports it).
const (
	damagedMissing  = "missing from the bucket: "
	damagedChecksum = "checksum mismatch: "
)

// recheckable reports whether a damage reason is one a later check may
// clear: objects found missing (by checkCopy, or a manifest by the
// reconciliation of a partition taken over).
func recheckable(reason string) bool {
	return strings.HasPrefix(reason, damagedMissing) || strings.HasPrefix(reason, "manifest missing")
}

// checkCopy checks that copy m's objects are all in the bucket. A copy
// with objects missing is marked damaged: it is reported, it no longer
// lets a local segment be deleted, and its segment is copied again while
// it is on local disk (the new copy then supersedes it). It marks only
// while the store is up: the gate passes (tierd's probe of the bucket
// succeeded) and a fresh check of the store (rsm.Manager.CheckStore: a
// filesystem bucket's root directory is the one opened) succeeds, so a
// store that is down or unmounted never reads as objects missing. A
// damaged copy whose objects are all present again is re-read whole; when
// every object's size and checksum match its manifest the mark is cleared
// (logged), else the reason becomes a checksum mismatch, which stays.
func (c *Copier) checkCopy(ctx context.Context, m remotelog.SegmentMetadata) error {
	missing, err := c.rs.MissingObjects(ctx, m)
	if err != nil {
		return err
	}
	c.m.copiesChecked.Inc()
	cur, err := c.store.Segment(m.TopicPartition, m.StartOffset, m.ID)
	if err != nil || cur.State != remotelog.CopySegmentFinished {
		return nil // deleted meanwhile
	}
	if len(missing) == 0 {
		if recheckable(cur.Damaged) {
			return c.recheckDamaged(ctx, cur)
		}
		return nil
	}
	reason := damagedMissing + strings.Join(missing, " ")
	if cur.Damaged == reason {
		return nil // already known
	}
	if _, gerr := c.environment(); gerr != nil {
		return fmt.Errorf("objects %v not found, but the store is not known to be up; not marking the copy damaged: %w", missing, gerr)
	}
	if err := c.rs.CheckStore(ctx); err != nil {
		return fmt.Errorf("objects %v not found, but the store check fails; not marking the copy damaged: %w", missing, err)
	}
	if _, err := c.store.MarkDamaged(m.TopicPartition, m.StartOffset, m.ID, reason); err != nil {
		return err
	}
	c.m.damaged.Inc()
	c.log.Error("a finished copy's objects are gone from the bucket: the copy is marked damaged; its segment is copied again if it is still on local disk; the mark clears if a later check finds every object back with its checksum",
		"partition", m.TopicPartition, "base_offset", m.StartOffset, "end_offset", m.EndOffset, "segment", m.ID, "missing", missing)
	return nil
}

// recheckDamaged re-reads a copy marked damaged for missing objects that
// are all present again, and clears the mark when every object matches
// its manifest; a mismatch replaces the reason.
func (c *Copier) recheckDamaged(ctx context.Context, cur remotelog.SegmentMetadata) error {
	err := c.rs.VerifyCopy(ctx, cur)
	switch {
	case err == nil:
		if _, err := c.store.ClearDamaged(cur.TopicPartition, cur.StartOffset, cur.ID); err != nil {
			return err
		}
		c.log.Info("a copy marked damaged is whole again (every object present, sizes and checksums as its manifest records): the mark is cleared",
			"partition", cur.TopicPartition, "base_offset", cur.StartOffset, "end_offset", cur.EndOffset, "segment", cur.ID, "was", cur.Damaged)
		return nil
	case errors.Is(err, rsm.ErrChecksum) || errors.Is(err, rsm.ErrBadManifest):
		if _, merr := c.store.MarkDamaged(cur.TopicPartition, cur.StartOffset, cur.ID, damagedChecksum+err.Error()); merr != nil {
			return merr
		}
		c.log.Error("a copy marked damaged has its objects back, but they differ from its manifest: it stays damaged",
			"partition", cur.TopicPartition, "base_offset", cur.StartOffset, "segment", cur.ID, "err", err)
		return nil
	}
	return fmt.Errorf("re-read the damaged copy: %w", err)
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

// copyPresent checks in the bucket that the exact copy of local segment s
// among fin has all its objects, and marks it damaged when not.
func (c *Copier) copyPresent(ctx context.Context, fin []remotelog.SegmentMetadata, s localSegment) (bool, error) {
	for _, r := range fin {
		if !copiedExactly([]remotelog.SegmentMetadata{r}, s) {
			continue
		}
		if err := c.checkCopy(ctx, r); err != nil {
			return false, fmt.Errorf("check the copy of segment %d before deleting it locally: %w", s.base, err)
		}
		cur, err := c.store.Segment(r.TopicPartition, r.StartOffset, r.ID)
		if err != nil {
			return false, err
		}
		if cur.Damaged == "" {
			return true, nil
		}
	}
	return false, nil
}
