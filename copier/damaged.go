package copier

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/tierd/tierd/internal/remotelog"
)

// maxSuspects bounds the copies queued by readers for a check.
const maxSuspects = 1024

// SuspectCopy queues a finished copy for a check of its objects on the
// next pass: the fetch server calls it when a read of the copy found an
// object missing (DATA_LOSS). It never blocks; past maxSuspects queued
// copies it drops the report.
func (c *Copier) SuspectCopy(meta remotelog.SegmentMetadata) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if len(c.suspects) < maxSuspects {
		c.suspects[meta.ID] = meta
	}
}

// checkCopies checks, once per pass, the copies readers reported and
// CopyChecksPerPass more taken in turn across the partitions this tierd
// tiers (one copy of each of the next partitions), so every copy is
// looked at now and then for the cost of a few requests per pass. A copy
// with an object missing is marked damaged: it is reported, it no longer
// lets a local segment be deleted, and its segment is copied again while
// it is on local disk (the new copy then supersedes it).
func (c *Copier) checkCopies(ctx context.Context, owned []remotelog.TopicPartition) error {
	c.stateMu.Lock()
	todo := make([]remotelog.SegmentMetadata, 0, len(c.suspects)+c.cfg.CopyChecksPerPass)
	for _, m := range c.suspects {
		todo = append(todo, m)
	}
	c.suspects = map[remotelog.SegmentID]remotelog.SegmentMetadata{}
	c.stateMu.Unlock()
	if n := len(owned); n > 0 && c.cfg.CopyChecksPerPass > 0 {
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

func (c *Copier) checkCopy(ctx context.Context, m remotelog.SegmentMetadata) error {
	missing, err := c.rs.MissingObjects(ctx, m)
	if err != nil {
		return err
	}
	c.m.copiesChecked.Inc()
	if len(missing) == 0 {
		return nil
	}
	reason := "missing from the bucket: " + strings.Join(missing, " ")
	cur, err := c.store.Segment(m.TopicPartition, m.StartOffset, m.ID)
	if err != nil || cur.State != remotelog.CopySegmentFinished || cur.Damaged == reason {
		return nil // deleted meanwhile, or already known
	}
	if _, err := c.store.MarkDamaged(m.TopicPartition, m.StartOffset, m.ID, reason); err != nil {
		return err
	}
	c.m.damaged.Inc()
	c.log.Error("a finished copy's objects are gone from the bucket: the copy is marked damaged; its segment is copied again if it is still on local disk",
		"partition", m.TopicPartition, "base_offset", m.StartOffset, "end_offset", m.EndOffset, "segment", m.ID, "missing", missing)
	return nil
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
