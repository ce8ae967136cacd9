package copier

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
)

// Errors of the operator commands.
var (
	ErrTopicStillLocal   = fmt.Errorf("copier: the topic still has live partition directories here (%w)", remotelog.ErrRefused)
	ErrTopicStillExists  = fmt.Errorf("copier: the kafka cluster says the topic still exists (%w)", remotelog.ErrRefused)
	ErrNothingScheduled  = fmt.Errorf("copier: no deletion is scheduled for the partition (%w)", remotelog.ErrNotFound)
	ErrNothingToDelete   = fmt.Errorf("copier: tierd has no remote copies of the topic (%w)", remotelog.ErrNotFound)
	ErrHeldElsewhere     = fmt.Errorf("copier: another tierd holds the partition's lease (%w)", remotelog.ErrRefused)
	ErrNotConfirmed      = fmt.Errorf("copier: the kafka cluster does not confirm the topic gone (%w)", remotelog.ErrRefused)
	ErrSeveralIncarnated = fmt.Errorf("copier: deletions of several incarnations are scheduled; name the topic id (%w)", remotelog.ErrAmbiguous)
)

// schedule records a whole-partition deletion due after the grace period.
func (w *partitionDeletions) schedule(tp remotelog.TopicPartition, topicID string, reason remotelog.DeletionReason, proof string) (remotelog.PartitionDeletion, error) {
	due := w.cfg.deleteDueMs(w.now().UnixMilli())
	d, err := w.store.ScheduleDeletion(tp, topicID, reason, proof, due)
	if err != nil {
		return d, err
	}
	w.m.deletionsScheduled.Inc()
	w.log.Warn("whole-partition deletion of remote copies scheduled; 'tierd partitions restore' cancels it until it is due",
		"partition", tp, "topic_id", topicID, "reason", reason, "proof", proof, "copies", len(d.Segments), "bytes", d.Bytes(),
		"due", remotelog.DueText(d.DueMs))
	return d, nil
}

// checkGoneTopics asks the cluster, once per pass, about every recorded
// topic id that the current view does not list, and schedules the
// deletion of those it answers are unknown. A topic missing from a view
// proves nothing by itself (ACLs hide topics); only UNKNOWN_TOPIC_ID for
// the id does. Partitions recorded without a topic id are never deleted
// this way.
func (w *partitionDeletions) checkGoneTopics(ctx context.Context) error {
	v := w.views.currentView()
	if w.cl == nil || v == nil || w.dirs.waitForDirs("whole-partition deletions of deleted topics") {
		return nil
	}
	tps, err := w.store.Partitions()
	if err != nil {
		return err
	}
	byID := map[string][]remotelog.TopicPartition{}
	var ids []string
	for _, tp := range tps {
		if !w.tiered(tp) {
			continue
		}
		off, ok, err := w.store.Offsets(tp)
		if err != nil || !ok {
			continue
		}
		if off.TopicID == "" {
			if _, listed := v.Topics[tp.Topic]; !listed && w.say.once("noid "+tp.String()) {
				w.log.Warn("topic is not in the cluster's metadata, and tierd recorded no topic id for it: nothing proves it deleted; "+
					"'tierd topics delete' deletes its copies", "partition", tp)
			}
			continue
		}
		if _, ok := v.ByID[off.TopicID]; ok {
			continue
		}
		if off.OperatorKept != "" {
			if w.say.once("kept " + tp.String() + off.TopicID) {
				w.log.Info("the cluster does not list the topic id, but an operator restored these copies: only 'tierd topics delete' deletes them",
					"partition", tp, "topic_id", off.TopicID, "kept", off.OperatorKept)
			}
			continue
		}
		if _, err := cluster.ParseTopicID(off.TopicID); err != nil {
			if w.say.once("badid " + off.TopicID) {
				w.log.Warn("recorded topic id is not one the cluster can be asked about; its copies are deleted only by an operator", "partition", tp, "err", err)
			}
			continue
		}
		if len(byID[off.TopicID]) == 0 {
			ids = append(ids, off.TopicID)
		}
		byID[off.TopicID] = append(byID[off.TopicID], tp)
	}
	if len(ids) == 0 {
		return nil
	}
	res, err := w.views.idStatuses(ctx, ids)
	if err != nil {
		return fmt.Errorf("ask the cluster about topic ids %v: %w", ids, err)
	}
	var errs []error
	for _, id := range ids {
		st := res[id]
		if st.State != cluster.IDGone {
			if w.say.once(fmt.Sprintf("idnotgone %s %d", id, st.State)) {
				w.log.Info("topic id is not listed by the cluster but not confirmed gone either; its copies stay", "topic_id", id, "answer", st.Proof)
			}
			continue
		}
		for _, tp := range byID[id] {
			if _, err := w.schedule(tp, id, remotelog.ReasonTopicDeleted, st.Proof); err != nil {
				errs = append(errs, fmt.Errorf("%s: schedule deletion: %w", tp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// runDeletions runs the scheduled deletions that are due, after checking
// their proof again: a topic-deleted one needs the cluster to answer,
// now, that the topic id is unknown (with the cluster unreachable it
// waits); an operator's one is cancelled if the cluster says the topic
// id exists; a tiering-disabled one is cancelled unless the topic's
// configuration still turns tiering off and orders the deletion. Each is journaled DELETING before its first object goes,
// and finished once every object of the incarnation is gone.
func (w *partitionDeletions) runDeletions(ctx context.Context) error {
	ds, err := w.store.Deletions(nil)
	if err != nil {
		return err
	}
	w.m.deletionsPending.Set(float64(len(ds)))
	if len(ds) > 0 && w.dirs.waitForDirs("scheduled whole-partition deletions") {
		return nil
	}
	var errs []error
	nowMs := w.now().UnixMilli()
	for _, d := range ds {
		if d.State == remotelog.DeletionPending && !d.Due(nowMs) {
			continue
		}
		if err := w.runDeletion(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("%s: deletion of topic id %q: %w", d.TopicPartition, d.TopicID, err))
		}
	}
	return errors.Join(errs...)
}

func (w *partitionDeletions) runDeletion(ctx context.Context, d remotelog.PartitionDeletion) error {
	detail := "grace period over"
	if d.State == remotelog.DeletionPending && d.Reason == remotelog.ReasonTieringDisabled {
		note, err := w.recheckPolicy(ctx, d)
		if errors.Is(err, errPolicyChanged) {
			if _, cerr := w.store.CancelDeletion(d.TopicPartition, d.TopicID, "cancelled: "+err.Error(), false); cerr != nil {
				return cerr
			}
			w.needSweep(d.TopicPartition)
			w.log.Warn("scheduled deletion cancelled: the topic's tiering policy no longer orders it", "partition", d.TopicPartition, "err", err)
			return nil
		}
		if errors.Is(err, errTopicNotInCluster) {
			w.waitForConfigs(d, err)
			return nil // it waits on the cluster or an operator: no failure of the pass
		}
		if err != nil {
			return fmt.Errorf("the deletion waits: %w", err)
		}
		detail += "; " + note
	} else if d.State == remotelog.DeletionPending && d.Reason == remotelog.ReasonOperator {
		if err := w.stillDeletable(ctx, d.TopicPartition, d.TopicID); err != nil {
			if w.say.once("waits " + d.TopicPartition.String() + err.Error()) {
				w.log.Warn("a due deletion waits: its proof no longer holds", "partition", d.TopicPartition, "topic_id", d.TopicID, "err", err)
			}
			return fmt.Errorf("the deletion waits: %w", err)
		}
	}
	if d.State == remotelog.DeletionPending && w.cl != nil && d.Reason != remotelog.ReasonTieringDisabled {
		if w.views.currentView() == nil {
			return fmt.Errorf("%w: the deletion waits for the cluster to confirm its proof", ErrClusterUnreachable)
		}
		note, err := w.confirmGone(ctx, d.TopicPartition.Topic, d.TopicID)
		switch {
		case errors.Is(err, ErrTopicStillExists):
			if _, cerr := w.store.CancelDeletion(d.TopicPartition, d.TopicID, "cancelled: "+err.Error(), false); cerr != nil {
				return cerr
			}
			w.log.Warn("scheduled deletion cancelled: the cluster says the topic still exists", "partition", d.TopicPartition, "topic_id", d.TopicID, "err", err)
			return nil
		case err != nil:
			return fmt.Errorf("the deletion waits: %w", err)
		}
		detail += "; " + note
	}
	d, err := w.store.StartDeletion(d.TopicPartition, d.TopicID, detail)
	if err != nil {
		return err
	}
	crashpoint.Hit("partition-delete.started")
	n, err := w.deleteIncarnation(ctx, d)
	if err != nil {
		return err
	}
	crashpoint.Hit("partition-delete.objects-deleted")
	if err := w.store.FinishDeletion(d.TopicPartition, d.TopicID, fmt.Sprintf("%d copies deleted", n)); err != nil {
		return err
	}
	w.m.deletionsRun.Inc()
	w.log.Warn("deleted every remote copy of a partition's incarnation", "partition", d.TopicPartition, "topic_id", d.TopicID,
		"reason", d.Reason, "proof", d.Proof, "copies", n, "bytes", d.Bytes())
	return nil
}

// deleteIncarnation deletes the objects of every copy in the record and,
// when the record has a topic id, of every other copy in the bucket whose
// manifest carries that same topic id (another tierd's copies the store
// never learned of). Manifests without a topic id, or with another one,
// are left alone; so are the copies of manifests that do not read
// (damaged, or encrypted under a KEK not listed), and then it returns an
// error after the rest, so that the deletion is not finished while they
// may belong to it. It returns how many copies it deleted.
func (w *partitionDeletions) deleteIncarnation(ctx context.Context, d remotelog.PartitionDeletion) (int, error) {
	n := 0
	done := map[remotelog.SegmentID]bool{}
	for i, r := range d.Segments {
		if err := w.objects.DeleteObjects(ctx, r.TopicPartition, r); err != nil {
			return n, fmt.Errorf("delete copy %s: %w", r.ID, err)
		}
		if i == 0 {
			crashpoint.Hit("partition-delete.first-copy")
		}
		done[r.ID] = true
		n++
	}
	if d.TopicID == "" {
		return n, w.objects.AbortUploads(ctx, d.TopicPartition, done)
	}
	mfs, listErr := w.rs.Manifests(ctx, d.TopicPartition)
	if listErr != nil && len(mfs) == 0 {
		return n, fmt.Errorf("list the incarnation's other copies: %w", listErr)
	}
	for _, mf := range mfs {
		if mf.TopicID != d.TopicID || done[mf.SegmentID] || mf.BrokerOwned { // a broker's copy is the broker's to delete
			continue
		}
		if err := w.objects.DeleteObjects(ctx, d.TopicPartition, mf.Metadata()); err != nil {
			return n, fmt.Errorf("delete copy %s: %w", mf.SegmentID, err)
		}
		done[mf.SegmentID] = true
		n++
	}
	if listErr != nil {
		// A manifest that does not read (damaged, or encrypted under a KEK
		// not listed) does not say its copy's incarnation: that copy is
		// kept, and the deletion is not finished while it is there.
		return n, fmt.Errorf("copies whose manifest does not read are kept (their incarnation is unknown); the deletion retries: %w", listErr)
	}
	return n, w.objects.AbortUploads(ctx, d.TopicPartition, done)
}

// pendingIDs returns the segment ids of a partition's scheduled deletions:
// copies that must not be adopted back from the bucket.
func (w *partitionDeletions) pendingIDs(tp remotelog.TopicPartition) (map[remotelog.SegmentID]bool, []remotelog.PartitionDeletion, error) {
	ds, err := w.store.Deletions(&tp)
	if err != nil {
		return nil, nil, err
	}
	ids := map[remotelog.SegmentID]bool{}
	for _, d := range ds {
		for _, s := range d.Segments {
			ids[s.ID] = true
		}
	}
	return ids, ds, nil
}
