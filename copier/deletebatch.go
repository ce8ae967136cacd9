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
	_, err := c.deleteGroup(ctx, r.TopicPartition, []remotelog.SegmentMetadata{r})
	return err
}

// deleteRemotes runs the delete protocol of deleteRemote for rows of
// partition tp, deleteBatch at a time (see deleteGroup). A group that
// fails does not stop the next. It returns the ids of the copies whose
// rows reached DELETE_SEGMENT_FINISHED, and every error joined.
func (c *Copier) deleteRemotes(ctx context.Context, tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata) (map[remotelog.SegmentID]bool, error) {
	deleted := map[remotelog.SegmentID]bool{}
	var errs []error
	for len(rows) > 0 {
		n := min(len(rows), deleteBatch)
		ids, err := c.deleteGroup(ctx, tp, rows[:n])
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
// objects are all gone. A copy whose objects failed to go stays in
// DELETE_SEGMENT_STARTED, which the next pass's cleanupUnfinished
// finishes, as after a crash at any step. It returns the ids of the
// copies it finished and every error joined.
func (c *Copier) deleteGroup(ctx context.Context, tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata) ([]remotelog.SegmentID, error) {
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
