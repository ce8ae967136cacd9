package copier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// deleteBatch is the most copies one group of deleteRemotes (and one
// group of remote retention) moves through the delete protocol. Each
// group costs two synced metadata writes whatever its size, instead of
// two per copy; 256 is the most rows a write may change while the
// store's change log still keeps it (rlmm's changeRowsMax), so the fetch
// server applies the change to its per-partition snapshot rather than
// reloading the partition.
const deleteBatch = 256

// deleteStore is what the deleter needs of the metadata store: a
// partition's rows, one row afresh, and the two ways a row of this
// tierd's leaves (a state change, or forgotten).
type deleteStore interface {
	Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	Segment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error)
	UpdateStates(tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, to remotelog.SegmentState) ([]remotelog.SegmentMetadata, error)
	ForgetSegment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) error
}

// deleteBucket is what the deleter needs of remote storage: a copy's
// objects deleted by key, incomplete uploads aborted (for a partition, or
// by a copy's exact keys), and the partition's fence.
type deleteBucket interface {
	DeleteSegment(ctx context.Context, meta remotelog.SegmentMetadata) error
	AbortUploads(ctx context.Context, tp remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) (int, error)
	AbortUploadsOf(ctx context.Context, meta remotelog.SegmentMetadata) (int, error)
	CheckFence(ctx context.Context, tp remotelog.TopicPartition, topicID string, leaderEpoch int32) error
}

// deleter runs the remote-delete protocol that retention, supersession,
// remote compaction and the clean-up of failed or dead copies share: the
// proof checked in the bucket right before (proofPresent),
// DELETE_SEGMENT_STARTED and DELETE_SEGMENT_FINISHED in batches
// (deleteGroup), the incomplete uploads of the deleted copies aborted
// (abortUploads, or by exact key with abort), and the rows of dead copies
// finished (cleanupUnfinished). The whole-partition deletion (runDeletion)
// deletes the objects its journal names on its own.
type deleter struct {
	store deleteStore
	rs    deleteBucket
	log   *slog.Logger
	// checkCopy checks a finished copy's objects in the bucket and marks
	// the copy damaged when some are missing (Copier.checkCopy).
	checkCopy func(ctx context.Context, m remotelog.SegmentMetadata) error
	// counted records one delete request of a partition and its error
	// (Copier.countDelete); deleted counts copies whose rows reached
	// DELETE_SEGMENT_FINISHED.
	counted func(tp remotelog.TopicPartition, err error)
	deleted func(n int)
	// needSweep has the partition swept on its next pass (Copier.needSweep).
	needSweep func(tp remotelog.TopicPartition)
}

// deleter returns the delete protocol over the copier's store and bucket
// as they are now.
func (c *Copier) deleter() *deleter {
	return &deleter{store: c.store, rs: c.rs, log: c.log, checkCopy: c.checkCopy, counted: c.countDelete,
		deleted: func(n int) { c.m.remoteDeleted.Add(float64(n)) }, needSweep: c.needSweep}
}

// proofPresent checks in the bucket that copy by, the proof for deleting
// the copies it supersedes, has its objects (checkCopy, which marks it
// damaged when they are gone, so that it supersedes nothing), and reports
// whether it is still finished and undamaged. Errors: the store's and
// the bucket's.
func (d *deleter) proofPresent(ctx context.Context, by remotelog.SegmentMetadata) (bool, error) {
	if err := d.checkCopy(ctx, by); err != nil {
		return false, err
	}
	cur, err := d.store.Segment(by.TopicPartition, by.StartOffset, by.ID)
	if err != nil {
		return false, err
	}
	return cur.State == remotelog.CopySegmentFinished && cur.Damaged == "", nil
}

// abandon forgets this tierd's row of a copy fenced after its manifest
// was written, leaving its objects to the new leader.
func (d *deleter) abandon(meta remotelog.SegmentMetadata, err error) error {
	if ferr := d.store.ForgetSegment(meta.TopicPartition, meta.StartOffset, meta.ID); ferr != nil {
		return errors.Join(err, ferr)
	}
	d.log.Warn("copy not committed and its objects left to the partition's new leader", "partition", meta.TopicPartition,
		"base_offset", meta.StartOffset, "segment", meta.ID)
	return err
}

// cleanupUnfinished finishes what a previous pass or process left: a row
// still in COPY_SEGMENT_STARTED is an abandoned copy (passes do not
// overlap, so no copy is in flight), a row in DELETE_SEGMENT_STARTED an
// interrupted delete or the cleanup of a failed copy that the store did
// not answer. Both have their objects deleted (missing objects are fine)
// and the incomplete uploads of their keys aborted by exact key, and end
// in DELETE_SEGMENT_FINISHED, deleteBatch copies per pair of synced
// writes (deleteRemotes with abort).
func (d *deleter) cleanupUnfinished(ctx context.Context, tp remotelog.TopicPartition) error {
	rows, err := d.store.Segments(tp)
	if err != nil {
		return err
	}
	var errs []error
	var dead []remotelog.SegmentMetadata
	for _, r := range rows {
		if r.State != remotelog.CopySegmentStarted && r.State != remotelog.DeleteSegmentStarted {
			continue
		}
		if r.State == remotelog.CopySegmentStarted {
			if r.CopyLeaderEpoch != nil {
				// Killed after its manifest, maybe: when a newer leader has
				// fenced the partition since, the copy is its to judge.
				if err := d.rs.CheckFence(ctx, tp, r.TopicID, *r.CopyLeaderEpoch); errors.Is(err, rsm.ErrFenced) {
					if err := d.abandon(r, err); err != nil && !errors.Is(err, rsm.ErrFenced) {
						errs = append(errs, err)
					}
					continue
				} else if err != nil {
					errs = append(errs, err)
					continue
				}
			}
			d.log.Info("cleaning up an unfinished copy", "partition", tp, "segment", r.ID, "base_offset", r.StartOffset)
		}
		dead = append(dead, r)
	}
	_, err = d.deleteRemotes(ctx, tp, dead, true)
	errs = append(errs, err)
	return errors.Join(errs...)
}

// abortUploads aborts the incomplete multipart uploads of copies of tp
// just deleted by deleteRemote or deleteRemotes (ids; their rows were this tierd's and no
// copy of tp is in flight): one listing of the partition's uploads for
// all of them, not one per copy. When it fails, the partition's next
// sweep aborts them.
func (d *deleter) abortUploads(ctx context.Context, tp remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) error {
	if len(ids) == 0 {
		return nil
	}
	n, err := d.rs.AbortUploads(ctx, tp, ids)
	if n > 0 {
		d.log.Info("aborted the incomplete uploads of deleted copies", "partition", tp, "copies", n)
	}
	if err != nil {
		d.needSweep(tp)
		return fmt.Errorf("abort the incomplete uploads of %d deleted copies: %w", len(ids), err)
	}
	return nil
}

// deleteRemote runs the delete protocol for one row: DELETE_SEGMENT_STARTED
// (synced), delete the objects (manifest first), DELETE_SEGMENT_FINISHED.
func (d *deleter) deleteRemote(ctx context.Context, r remotelog.SegmentMetadata) error {
	_, err := d.deleteGroup(ctx, r.TopicPartition, []remotelog.SegmentMetadata{r}, false)
	return err
}

// discardCopy runs the delete protocol for the row of a copy that failed
// or was cut off (see deleteGroup with abort): besides its objects, the
// incomplete multipart uploads of its keys are aborted, each by its
// exact key (rsm.Manager.AbortUploadsOf), before the row reaches
// DELETE_SEGMENT_FINISHED. A store that does not answer leaves the row in
// DELETE_SEGMENT_STARTED, so every later pass's cleanupUnfinished tries
// again (a restart included) until both are done.
func (d *deleter) discardCopy(ctx context.Context, r remotelog.SegmentMetadata) error {
	_, err := d.deleteGroup(ctx, r.TopicPartition, []remotelog.SegmentMetadata{r}, true)
	return err
}

// deleteRemotes runs the delete protocol of deleteRemote (abort false) or
// discardCopy (abort true) for rows of partition tp, deleteBatch at a
// time (see deleteGroup). A group that fails does not stop the next. It
// returns the ids of the copies whose rows reached
// DELETE_SEGMENT_FINISHED, and every error joined.
func (d *deleter) deleteRemotes(ctx context.Context, tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, abort bool) (map[remotelog.SegmentID]bool, error) {
	deleted := map[remotelog.SegmentID]bool{}
	var errs []error
	for len(rows) > 0 {
		n := min(len(rows), deleteBatch)
		ids, err := d.deleteGroup(ctx, tp, rows[:n], abort)
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
func (d *deleter) deleteGroup(ctx context.Context, tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, abort bool) ([]remotelog.SegmentID, error) {
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
		moved, err := d.store.UpdateStates(tp, start, remotelog.DeleteSegmentStarted)
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
		err := d.rs.DeleteSegment(ctx, r)
		d.counted(tp, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete segment %s: %w", r.ID, err))
			continue
		}
		crashpoint.Hit("remote.objects-deleted")
		if abort {
			n, err := d.rs.AbortUploadsOf(ctx, r)
			if n > 0 {
				d.log.Info("aborted the incomplete uploads of a copy that did not finish", "partition", tp, "segment", r.ID,
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
	if _, err := d.store.UpdateStates(tp, gone, remotelog.DeleteSegmentFinished); err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	d.deleted(len(gone))
	ids := make([]remotelog.SegmentID, len(gone))
	for i, r := range gone {
		ids[i] = r.ID
	}
	return ids, errors.Join(errs...)
}
