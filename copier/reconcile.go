package copier

import (
	"context"
	"fmt"

	"github.com/tierd/tierd/internal/remotelog"
)

// reconcile makes the rows of a partition whose store may be stale (it was
// tiered by another tierd) agree with the manifests in the bucket:
// manifests without a row are the other owner's copies, and are taken in.
// A finished row whose manifest the bucket no longer lists was probably
// deleted by the other owner (deletes go manifest first), but a manifest
// lost any other way explains it too: the row is marked damaged, never
// deleted here, so its segment is copied again while it is local and its
// remains go only by this tierd's own retention. It needs every manifest
// to be readable, and fails otherwise.
func (c *Copier) reconcile(ctx context.Context, tp remotelog.TopicPartition) error {
	mfs, err := c.rs.Manifests(ctx, tp)
	if err != nil {
		return fmt.Errorf("reconcile with the bucket: %w", err)
	}
	inBucket := map[remotelog.SegmentID]bool{}
	for _, mf := range mfs {
		inBucket[mf.SegmentID] = true
	}
	off, _, err := c.store.Offsets(tp)
	if err != nil {
		return err
	}
	if mfs, err = c.adoptable(tp, off.TopicID, mfs); err != nil {
		return err
	}
	rows, err := c.store.Segments(tp)
	if err != nil {
		return err
	}
	known := map[remotelog.SegmentID]bool{}
	storeUp := func() error { // as checkCopy: a store down or unmounted is no evidence of missing objects
		if _, err := c.environment(); err != nil {
			return fmt.Errorf("manifests not listed, but the store is not known to be up; not marking copies damaged: %w", err)
		}
		if err := c.rs.CheckStore(ctx); err != nil {
			return fmt.Errorf("manifests not listed, but the store check fails; not marking copies damaged: %w", err)
		}
		return nil
	}
	checked := false
	for _, r := range rows {
		known[r.ID] = true
		if r.State == remotelog.CopySegmentFinished && !inBucket[r.ID] && r.Damaged == "" {
			if !checked {
				if err := storeUp(); err != nil {
					return err
				}
				checked = true
			}
			if _, err := c.store.MarkDamaged(tp, r.StartOffset, r.ID, "manifest missing from the bucket"); err != nil {
				return err
			}
			c.m.damaged.Inc()
			c.log.Warn("a finished copy's manifest is gone from the bucket: the copy is marked damaged, nothing is deleted",
				"partition", tp, "base_offset", r.StartOffset, "segment", r.ID)
		}
	}
	for _, mf := range mfs {
		if !known[mf.SegmentID] {
			if err := c.store.ImportSegment(mf.Metadata()); err != nil {
				return err
			}
			c.m.rebuilt.Inc()
		}
	}
	if fin, err := c.store.FinishedSegments(tp); err == nil && len(fin) > 0 {
		_, err = c.store.AdvanceOffsets(tp, fin[0].StartOffset, -1)
		return err
	}
	return nil
}
