package copier

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
)

// deleteBatch is the most copies one group of deleteRemotes (and one
// group of remote retention) moves through the delete protocol. Each
// group costs two synced metadata writes whatever its size, instead of
// two per copy; 256 is the most rows a write may change while the
// store's change log still keeps it (rlmm's changeRowsMax), so the fetch
// server applies the change to its per-partition snapshot rather than
// reloading the partition.
const deleteBatch = 256

// deleteRemote runs the delete protocol for one row: DELETE_SEGMENT_STARTED
// (synced), delete the objects (manifest first), DELETE_SEGMENT_FINISHED.
func (c *Copier) deleteRemote(ctx context.Context, r remotelog.SegmentMetadata) error {
	_, err := c.deleteGroup(ctx, r.TopicPartition, []remotelog.SegmentMetadata{r}, false)
	return err
}

// discardCopy runs the delete protocol for the row of a copy that failed
// or was cut off (see deleteGroup with abort): besides its objects, the
// incomplete multipart uploads of its keys are aborted, each by its
// exact key (rsm.Manager.AbortUploadsOf), before the row reaches
// DELETE_SEGMENT_FINISHED. A store that does not answer leaves the row in
// DELETE_SEGMENT_STARTED, so every later pass's cleanupUnfinished tries
// again (a restart included) until both are done.
func (c *Copier) discardCopy(ctx context.Context, r remotelog.SegmentMetadata) error {
	_, err := c.deleteGroup(ctx, r.TopicPartition, []remotelog.SegmentMetadata{r}, true)
	return err
}

// deleteRemotes runs the delete protocol of deleteRemote (abort false) or
// discardCopy (abort true) for rows of partition tp, deleteBatch at a
// time (see deleteGroup). A group that fails does not stop the next. It
// returns the ids of the copies whose rows reached
// DELETE_SEGMENT_FINISHED, and every error joined.
func (c *Copier) deleteRemotes(ctx context.Context, tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, abort bool) (map[remotelog.SegmentID]bool, error) {
	deleted := map[remotelog.SegmentID]bool{}
	var errs []error
	for len(rows) > 0 {
		n := min(len(rows), deleteBatch)
		ids, err := c.deleteGroup(ctx, tp, rows[:n], abort)
		for _, id := range ids {
			deleted[id] = true
		}
		errs = append(errs, err)
		rows = rows[n:]
	}
	return deleted, errors.Join(errs...)
}

// deleteGroup runs the delete protocol for rows of partition tp at once:
// DELETE_SEGMENT_STARTED for every row not yet in it, in one synced
// write (all rows or none), so that no object goes before its row says
// so durably; then each copy's objects (manifest first), one copy after
// another, a failure not stopping the others; then
// DELETE_SEGMENT_FINISHED, in one synced write, for the copies whose
// objects are all gone. With abort, a copy's objects count as gone only
// once the incomplete multipart uploads of its keys are aborted too, by
// their exact keys (seven listings of one key a copy: for copies that
// failed or were cut off, and leftovers of a crash or an outage, not for
// retention's deletes of finished copies, which a partition-wide listing
// serves). A copy whose objects failed to go stays in
// DELETE_SEGMENT_STARTED, which the next pass's cleanupUnfinished
// finishes, as after a crash at any step. It returns the ids of the
// copies it finished and every error joined.
func (c *Copier) deleteGroup(ctx context.Context, tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, abort bool) ([]remotelog.SegmentID, error) {
	cur := append([]remotelog.SegmentMetadata(nil), rows...)
	var at []int // the indexes of the rows to move to DELETE_SEGMENT_STARTED
	var start []remotelog.SegmentMetadata
	for i, r := range cur {
		if r.State != remotelog.DeleteSegmentStarted {
			at = append(at, i)
			start = append(start, r)
		}
	}
	if len(start) > 0 {
		moved, err := c.store.UpdateStates(tp, start, remotelog.DeleteSegmentStarted)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			cur[i] = moved[j]
		}
	}
	crashpoint.Hit("remote.delete-started")
	var gone []remotelog.SegmentMetadata
	var errs []error
	for _, r := range cur {
		err := c.rs.DeleteSegment(ctx, r)
		c.countDelete(tp, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete segment %s: %w", r.ID, err))
			continue
		}
		crashpoint.Hit("remote.objects-deleted")
		if abort {
			n, err := c.rs.AbortUploadsOf(ctx, r)
			if n > 0 {
				c.log.Info("aborted the incomplete uploads of a copy that did not finish", "partition", tp, "segment", r.ID,
					"base_offset", r.StartOffset, "uploads", n)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("abort the incomplete uploads of segment %s: %w", r.ID, err))
				continue
			}
		}
		gone = append(gone, r)
	}
	if len(gone) == 0 {
		return nil, errors.Join(errs...)
	}
	if _, err := c.store.UpdateStates(tp, gone, remotelog.DeleteSegmentFinished); err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	c.m.remoteDeleted.Add(float64(len(gone)))
	ids := make([]remotelog.SegmentID, len(gone))
	for i, r := range gone {
		ids[i] = r.ID
	}
	return ids, errors.Join(errs...)
}
