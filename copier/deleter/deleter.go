package deleter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/tierd/tierd/copier/retention"
	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// Batch is the most copies one Group moves through the delete protocol
// (DeleteAll, and remote retention's groups). Each group costs two synced
// metadata writes whatever its size, instead of two per copy; 256 is the
// most rows a write may change while the store's change log still keeps
// it (rlmm's changeRowsMax), so the fetch server applies the change to
// its per-partition snapshot rather than reloading the partition.
const Batch = 256

// Store is what the deleter needs of the metadata store (rlmm.Store): a
// partition's rows, one row afresh, and the two ways a row of this
// tierd's leaves (a state change, or forgotten).
type Store interface {
	Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	Segment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error)
	UpdateStates(tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, to remotelog.SegmentState) ([]remotelog.SegmentMetadata, error)
	ForgetSegment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) error
}

// Bucket is what the deleter needs of remote storage (rsm.Manager): a
// copy's objects deleted by key, incomplete uploads aborted (for a
// partition, or by a copy's exact keys), and the partition's fence.
type Bucket interface {
	DeleteSegment(ctx context.Context, meta remotelog.SegmentMetadata) error
	AbortUploads(ctx context.Context, tp remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) (int, error)
	AbortUploadsOf(ctx context.Context, meta remotelog.SegmentMetadata) (int, error)
	CheckFence(ctx context.Context, tp remotelog.TopicPartition, topicID string, leaderEpoch int32) error
}

// Deleter runs the remote-delete protocol. Every field is required.
type Deleter struct {
	Store  Store
	Bucket Bucket
	Log    *slog.Logger
	// CheckCopy checks a finished copy's objects in the bucket and marks
	// the copy damaged when some are missing; an error when that cannot
	// be told.
	CheckCopy func(ctx context.Context, m remotelog.SegmentMetadata) error
	// Counted records one delete request of a partition and its error;
	// Deleted counts copies whose rows reached DELETE_SEGMENT_FINISHED.
	Counted func(tp remotelog.TopicPartition, err error)
	Deleted func(n int)
	// NeedSweep has the partition swept on its next pass: incomplete
	// uploads may be left.
	NeedSweep func(tp remotelog.TopicPartition)
}

// ProofPresent checks in the bucket that copy by, the proof for deleting
// the copies it supersedes, has its objects (CheckCopy, which marks it
// damaged when they are gone, so that it supersedes nothing), and reports
// whether it is still finished and undamaged. Errors: the store's and
// the bucket's.
func (d *Deleter) ProofPresent(ctx context.Context, by remotelog.SegmentMetadata) (bool, error) {
	if err := d.CheckCopy(ctx, by); err != nil {
		return false, err
	}
	cur, err := d.Store.Segment(by.TopicPartition, by.StartOffset, by.ID)
	if err != nil {
		return false, err
	}
	return cur.State == remotelog.CopySegmentFinished && cur.Damaged == "", nil
}

// DeleteSuperseded deletes, Batch at a time (DeleteAll), the copies that
// newer copies supersede (retention.Superseded), each only once the copy
// that supersedes it (By) is checked present in the bucket right before
// (ProofPresent, once for each By): a row alone, its objects lost since,
// is no proof, and the superseded copy may be the only copy of its
// records left. Each is logged with its proof. It returns the ids of the
// copies whose rows reached DELETE_SEGMENT_FINISHED, and every error
// joined.
func (d *Deleter) DeleteSuperseded(ctx context.Context, tp remotelog.TopicPartition, cands []retention.SupersededCopy) (map[remotelog.SegmentID]bool, error) {
	var errs []error
	whole := map[remotelog.SegmentID]bool{} // superseding copies checked in the bucket
	var superseded []remotelog.SegmentMetadata
	for _, sc := range cands {
		present, seen := whole[sc.By.ID]
		if !seen {
			var err error
			if present, err = d.ProofPresent(ctx, sc.By); err != nil {
				errs = append(errs, fmt.Errorf("check copy %s before deleting the copies it supersedes: %w", sc.By.ID, err))
			}
			whole[sc.By.ID] = present
		}
		if !present {
			continue
		}
		d.Log.Info("deleting superseded copy", "partition", tp, "segment", sc.Copy.ID, "base_offset", sc.Copy.StartOffset, "proof", SupersededProof(sc.By))
		superseded = append(superseded, sc.Copy)
	}
	gone, err := d.DeleteAll(ctx, tp, superseded, false)
	return gone, errors.Join(append(errs, err)...)
}

// SupersededProof words the proof for deleting a copy that by covers.
func SupersededProof(by remotelog.SegmentMetadata) string {
	return fmt.Sprintf("superseded by copy %s %s covering [%d, %d]", by.ID, by.State, by.StartOffset, by.EndOffset)
}

// Abandon forgets this tierd's row of a copy fenced after its manifest
// was written, leaving its objects to the new leader.
func (d *Deleter) Abandon(meta remotelog.SegmentMetadata, err error) error {
	if ferr := d.Store.ForgetSegment(meta.TopicPartition, meta.StartOffset, meta.ID); ferr != nil {
		return errors.Join(err, ferr)
	}
	d.Log.Warn("copy not committed and its objects left to the partition's new leader", "partition", meta.TopicPartition,
		"base_offset", meta.StartOffset, "segment", meta.ID)
	return err
}

// CleanupUnfinished finishes what a previous pass or process left: a row
// still in COPY_SEGMENT_STARTED is an abandoned copy (passes do not
// overlap, so no copy is in flight), a row in DELETE_SEGMENT_STARTED an
// interrupted delete or the cleanup of a failed copy that the store did
// not answer. Both have their objects deleted (missing objects are fine)
// and the incomplete uploads of their keys aborted by exact key, and end
// in DELETE_SEGMENT_FINISHED, Batch copies per pair of synced
// writes (DeleteAll with abort).
func (d *Deleter) CleanupUnfinished(ctx context.Context, tp remotelog.TopicPartition) error {
	rows, err := d.Store.Segments(tp)
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
				if err := d.Bucket.CheckFence(ctx, tp, r.TopicID, *r.CopyLeaderEpoch); errors.Is(err, rsm.ErrFenced) {
					if err := d.Abandon(r, err); err != nil && !errors.Is(err, rsm.ErrFenced) {
						errs = append(errs, err)
					}
					continue
				} else if err != nil {
					errs = append(errs, err)
					continue
				}
			}
			d.Log.Info("cleaning up an unfinished copy", "partition", tp, "segment", r.ID, "base_offset", r.StartOffset)
		}
		dead = append(dead, r)
	}
	_, err = d.DeleteAll(ctx, tp, dead, true)
	errs = append(errs, err)
	return errors.Join(errs...)
}

// AbortUploads aborts the incomplete multipart uploads of copies of tp
// just deleted by Delete or DeleteAll (ids; their rows were this tierd's and no
// copy of tp is in flight): one listing of the partition's uploads for
// all of them, not one per copy. When it fails, the partition's next
// sweep aborts them.
func (d *Deleter) AbortUploads(ctx context.Context, tp remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) error {
	if len(ids) == 0 {
		return nil
	}
	n, err := d.Bucket.AbortUploads(ctx, tp, ids)
	if n > 0 {
		d.Log.Info("aborted the incomplete uploads of deleted copies", "partition", tp, "copies", n)
	}
	if err != nil {
		d.NeedSweep(tp)
		return fmt.Errorf("abort the incomplete uploads of %d deleted copies: %w", len(ids), err)
	}
	return nil
}

// DeleteObjects deletes one copy's objects (manifest first) outside the
// row protocol, for a deletion that a journal of its own records (the
// copier's whole-partition deletion: the rows left the store for its
// journal when it was scheduled). The request is counted as tp's
// (Counted) and, when it succeeded, the copy as deleted (Deleted). The
// bucket's error is returned as it is.
func (d *Deleter) DeleteObjects(ctx context.Context, tp remotelog.TopicPartition, r remotelog.SegmentMetadata) error {
	err := d.Bucket.DeleteSegment(ctx, r)
	d.Counted(tp, err)
	if err == nil {
		d.Deleted(1)
	}
	return err
}

// Delete runs the delete protocol for one row: DELETE_SEGMENT_STARTED
// (synced), delete the objects (manifest first), DELETE_SEGMENT_FINISHED.
func (d *Deleter) Delete(ctx context.Context, r remotelog.SegmentMetadata) error {
	_, err := d.Group(ctx, r.TopicPartition, []remotelog.SegmentMetadata{r}, false)
	return err
}

// Discard runs the delete protocol for the row of a copy that failed
// or was cut off (see Group with abort): besides its objects, the
// incomplete multipart uploads of its keys are aborted, each by its
// exact key (rsm.Manager.AbortUploadsOf), before the row reaches
// DELETE_SEGMENT_FINISHED. A store that does not answer leaves the row in
// DELETE_SEGMENT_STARTED, so every later pass's CleanupUnfinished tries
// again (a restart included) until both are done.
func (d *Deleter) Discard(ctx context.Context, r remotelog.SegmentMetadata) error {
	_, err := d.Group(ctx, r.TopicPartition, []remotelog.SegmentMetadata{r}, true)
	return err
}

// DeleteAll runs the delete protocol of Delete (abort false) or
// Discard (abort true) for rows of partition tp, Batch at a
// time (see Group). A group that fails does not stop the next. It
// returns the ids of the copies whose rows reached
// DELETE_SEGMENT_FINISHED, and every error joined.
func (d *Deleter) DeleteAll(ctx context.Context, tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, abort bool) (map[remotelog.SegmentID]bool, error) {
	deleted := map[remotelog.SegmentID]bool{}
	var errs []error
	for len(rows) > 0 {
		n := min(len(rows), Batch)
		ids, err := d.Group(ctx, tp, rows[:n], abort)
		for _, id := range ids {
			deleted[id] = true
		}
		errs = append(errs, err)
		rows = rows[n:]
	}
	return deleted, errors.Join(errs...)
}

// Group runs the delete protocol for rows of partition tp at once:
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
// DELETE_SEGMENT_STARTED, which the next pass's CleanupUnfinished
// finishes, as after a crash at any step. It returns the ids of the
// copies it finished and every error joined.
func (d *Deleter) Group(ctx context.Context, tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, abort bool) ([]remotelog.SegmentID, error) {
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
		moved, err := d.Store.UpdateStates(tp, start, remotelog.DeleteSegmentStarted)
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
		err := d.Bucket.DeleteSegment(ctx, r)
		d.Counted(tp, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete segment %s: %w", r.ID, err))
			continue
		}
		crashpoint.Hit("remote.objects-deleted")
		if abort {
			n, err := d.Bucket.AbortUploadsOf(ctx, r)
			if n > 0 {
				d.Log.Info("aborted the incomplete uploads of a copy that did not finish", "partition", tp, "segment", r.ID,
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
	if _, err := d.Store.UpdateStates(tp, gone, remotelog.DeleteSegmentFinished); err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	d.Deleted(len(gone))
	ids := make([]remotelog.SegmentID, len(gone))
	for i, r := range gone {
		ids[i] = r.ID
	}
	return ids, errors.Join(errs...)
}
