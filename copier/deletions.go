package copier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/kafkalog"
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
func (c *Copier) schedule(tp remotelog.TopicPartition, topicID string, reason remotelog.DeletionReason, proof string) (remotelog.PartitionDeletion, error) {
	due := c.cfg.deleteDueMs(c.now().UnixMilli())
	d, err := c.store.ScheduleDeletion(tp, topicID, reason, proof, due)
	if err != nil {
		return d, err
	}
	c.m.deletionsScheduled.Inc()
	c.log.Warn("whole-partition deletion of remote copies scheduled; 'tierd partitions restore' cancels it until it is due",
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
func (c *Copier) checkGoneTopics(ctx context.Context) error {
	v := c.currentView()
	if c.cl == nil || v == nil || c.waitForDirs("whole-partition deletions of deleted topics") {
		return nil
	}
	tps, err := c.store.Partitions()
	if err != nil {
		return err
	}
	byID := map[string][]remotelog.TopicPartition{}
	var ids []string
	for _, tp := range tps {
		if !c.tiered(tp) {
			continue
		}
		off, ok, err := c.store.Offsets(tp)
		if err != nil || !ok {
			continue
		}
		if off.TopicID == "" {
			if _, listed := v.Topics[tp.Topic]; !listed && c.once("noid "+tp.String()) {
				c.log.Warn("topic is not in the cluster's metadata, and tierd recorded no topic id for it: nothing proves it deleted; "+
					"'tierd topics delete' deletes its copies", "partition", tp)
			}
			continue
		}
		if _, ok := v.ByID[off.TopicID]; ok {
			continue
		}
		if off.OperatorKept != "" {
			if c.once("kept " + tp.String() + off.TopicID) {
				c.log.Info("the cluster does not list the topic id, but an operator restored these copies: only 'tierd topics delete' deletes them",
					"partition", tp, "topic_id", off.TopicID, "kept", off.OperatorKept)
			}
			continue
		}
		if _, err := cluster.ParseTopicID(off.TopicID); err != nil {
			if c.once("badid " + off.TopicID) {
				c.log.Warn("recorded topic id is not one the cluster can be asked about; its copies are deleted only by an operator", "partition", tp, "err", err)
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
	res, err := c.idStatuses(ctx, ids)
	if err != nil {
		return fmt.Errorf("ask the cluster about topic ids %v: %w", ids, err)
	}
	var errs []error
	for _, id := range ids {
		st := res[id]
		if st.State != cluster.IDGone {
			if c.once(fmt.Sprintf("idnotgone %s %d", id, st.State)) {
				c.log.Info("topic id is not listed by the cluster but not confirmed gone either; its copies stay", "topic_id", id, "answer", st.Proof)
			}
			continue
		}
		for _, tp := range byID[id] {
			if _, err := c.schedule(tp, id, remotelog.ReasonTopicDeleted, st.Proof); err != nil {
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
func (c *Copier) runDeletions(ctx context.Context) error {
	ds, err := c.store.Deletions(nil)
	if err != nil {
		return err
	}
	c.m.deletionsPending.Set(float64(len(ds)))
	if len(ds) > 0 && c.waitForDirs("scheduled whole-partition deletions") {
		return nil
	}
	var errs []error
	nowMs := c.now().UnixMilli()
	for _, d := range ds {
		if d.State == remotelog.DeletionPending && !d.Due(nowMs) {
			continue
		}
		if err := c.runDeletion(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("%s: deletion of topic id %q: %w", d.TopicPartition, d.TopicID, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Copier) runDeletion(ctx context.Context, d remotelog.PartitionDeletion) error {
	detail := "grace period over"
	if d.State == remotelog.DeletionPending && d.Reason == remotelog.ReasonTieringDisabled {
		note, err := c.recheckPolicy(ctx, d)
		if errors.Is(err, errPolicyChanged) {
			if _, cerr := c.store.CancelDeletion(d.TopicPartition, d.TopicID, "cancelled: "+err.Error(), false); cerr != nil {
				return cerr
			}
			c.needSweep(d.TopicPartition)
			c.log.Warn("scheduled deletion cancelled: the topic's tiering policy no longer orders it", "partition", d.TopicPartition, "err", err)
			return nil
		}
		if errors.Is(err, errTopicNotInCluster) {
			c.waitForConfigs(d, err)
			return nil // it waits on the cluster or an operator: no failure of the pass
		}
		if err != nil {
			return fmt.Errorf("the deletion waits: %w", err)
		}
		detail += "; " + note
	} else if d.State == remotelog.DeletionPending && d.Reason == remotelog.ReasonOperator {
		if err := c.stillDeletable(ctx, d.TopicPartition, d.TopicID); err != nil {
			if c.once("waits " + d.TopicPartition.String() + err.Error()) {
				c.log.Warn("a due deletion waits: its proof no longer holds", "partition", d.TopicPartition, "topic_id", d.TopicID, "err", err)
			}
			return fmt.Errorf("the deletion waits: %w", err)
		}
	}
	if d.State == remotelog.DeletionPending && c.cl != nil && d.Reason != remotelog.ReasonTieringDisabled {
		if c.currentView() == nil {
			return fmt.Errorf("%w: the deletion waits for the cluster to confirm its proof", ErrClusterUnreachable)
		}
		note, err := c.confirmGone(ctx, d.TopicPartition.Topic, d.TopicID)
		switch {
		case errors.Is(err, ErrTopicStillExists):
			if _, cerr := c.store.CancelDeletion(d.TopicPartition, d.TopicID, "cancelled: "+err.Error(), false); cerr != nil {
				return cerr
			}
			c.log.Warn("scheduled deletion cancelled: the cluster says the topic still exists", "partition", d.TopicPartition, "topic_id", d.TopicID, "err", err)
			return nil
		case err != nil:
			return fmt.Errorf("the deletion waits: %w", err)
		}
		detail += "; " + note
	}
	d, err := c.store.StartDeletion(d.TopicPartition, d.TopicID, detail)
	if err != nil {
		return err
	}
	crashpoint.Hit("partition-delete.started")
	n, err := c.deleteIncarnation(ctx, d)
	if err != nil {
		return err
	}
	crashpoint.Hit("partition-delete.objects-deleted")
	if err := c.store.FinishDeletion(d.TopicPartition, d.TopicID, fmt.Sprintf("%d copies deleted", n)); err != nil {
		return err
	}
	c.m.deletionsRun.Inc()
	c.log.Warn("deleted every remote copy of a partition's incarnation", "partition", d.TopicPartition, "topic_id", d.TopicID,
		"reason", d.Reason, "proof", d.Proof, "copies", n, "bytes", d.Bytes())
	return nil
}

// deleteIncarnation deletes the objects of every copy in the record and,
// when the record has a topic id, of every other copy in the bucket whose
// manifest carries that same topic id (another tierd's copies the store
// never learned of). Manifests without a topic id, or with another one,
// are left alone. It returns how many copies it deleted.
func (c *Copier) deleteIncarnation(ctx context.Context, d remotelog.PartitionDeletion) (int, error) {
	n := 0
	done := map[remotelog.SegmentID]bool{}
	for i, r := range d.Segments {
		err := c.rs.DeleteSegment(ctx, r)
		c.countDelete(r.TopicPartition, err)
		if err != nil {
			return n, fmt.Errorf("delete copy %s: %w", r.ID, err)
		}
		if i == 0 {
			crashpoint.Hit("partition-delete.first-copy")
		}
		done[r.ID] = true
		n++
		c.m.remoteDeleted.Inc()
	}
	if d.TopicID == "" {
		return n, c.deletes().AbortUploads(ctx, d.TopicPartition, done)
	}
	mfs, err := c.rs.Manifests(ctx, d.TopicPartition)
	if err != nil && len(mfs) == 0 {
		return n, fmt.Errorf("list the incarnation's other copies: %w", err)
	}
	for _, mf := range mfs {
		if mf.TopicID != d.TopicID || done[mf.SegmentID] || mf.BrokerOwned { // a broker's copy is the broker's to delete
			continue
		}
		err := c.rs.DeleteSegment(ctx, mf.Metadata())
		c.countDelete(d.TopicPartition, err)
		if err != nil {
			return n, fmt.Errorf("delete copy %s: %w", mf.SegmentID, err)
		}
		done[mf.SegmentID] = true
		n++
		c.m.remoteDeleted.Inc()
	}
	return n, c.deletes().AbortUploads(ctx, d.TopicPartition, done)
}

// pendingIDs returns the segment ids of a partition's scheduled deletions:
// copies that must not be adopted back from the bucket.
func (c *Copier) pendingIDs(tp remotelog.TopicPartition) (map[remotelog.SegmentID]bool, []remotelog.PartitionDeletion, error) {
	ds, err := c.store.Deletions(&tp)
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

// lockPass waits for the running pass (if any) to end, until ctx ends;
// operator commands run between passes. sync.Mutex hands the lock to a
// waiter blocked for more than a millisecond, so back-to-back passes
// cannot starve a command.
func (c *Copier) lockPass(ctx context.Context) error {
	got := make(chan struct{})
	go func() {
		c.mu.Lock()
		close(got)
	}()
	select {
	case <-got:
		return nil
	case <-ctx.Done():
		go func() { <-got; c.mu.Unlock() }()
		return fmt.Errorf("waiting for the copier's current pass to end: %w", ctx.Err())
	}
}

// DeleteTopic schedules the deletion of every remote copy of a topic's
// partitions that tierd recorded (of incarnation topicID when not ""),
// due after the grace period, on an operator's order; who is journaled
// as the proof's author. It refuses (ErrTopicStillLocal) while a live
// partition directory of the topic holds the same incarnation (tierd
// would tier it again), and, with a cluster, (ErrTopicStillExists) when
// the cluster says the topic id, or for copies without a topic id the
// topic name, still exists, or when the cluster cannot be asked; and
// (ErrLogDirUnavailable) while a configured log dir is missing or
// unreadable, now or in the last pass: it may hold the topic's
// partitions.
func (c *Copier) DeleteTopic(ctx context.Context, topic, topicID, who string) ([]remotelog.PartitionDeletion, error) {
	if err := c.lockPass(ctx); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if bad := c.unavailableDirs(); bad != "" {
		return nil, fmt.Errorf("%w: %s; it may hold partitions of %s, so tierd accepts no deletion until it is back (restore it, or remove it "+
			"from copier.log_dirs and restart tierd)", ErrLogDirUnavailable, bad, topic)
	}
	tps, err := c.store.Partitions()
	if err != nil {
		return nil, err
	}
	type target struct {
		tp remotelog.TopicPartition
		id string
	}
	var targets []target
	for _, tp := range tps {
		if tp.Topic != topic {
			continue
		}
		off, ok, err := c.store.Offsets(tp)
		if err != nil {
			return nil, err
		}
		if ok && (topicID == "" || off.TopicID == topicID) {
			targets = append(targets, target{tp, off.TopicID})
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("%w: %s (topic id %q)", ErrNothingToDelete, topic, topicID)
	}
	notes := map[string]string{}
	for _, t := range targets {
		if err := c.stillDeletable(ctx, t.tp, t.id); err != nil {
			return nil, err
		}
		if _, done := notes[t.id]; done {
			continue
		}
		notes[t.id] = "no kafka cluster configured"
		if c.cl != nil {
			note, err := c.confirmGone(ctx, topic, t.id)
			if err != nil {
				return nil, err
			}
			notes[t.id] = note
		}
	}
	order := "tierd topics delete " + topic
	if topicID != "" {
		order = "tierd topics delete --topic-id " + topicID + " " + topic
	}
	var out []remotelog.PartitionDeletion
	for _, t := range targets {
		proof := fmt.Sprintf("operator order '%s' by %s at %s; %s", order, who, c.now().UTC().Format(time.RFC3339), notes[t.id])
		d, err := c.schedule(t.tp, t.id, remotelog.ReasonOperator, proof)
		if err != nil {
			return out, fmt.Errorf("%s: %w", t.tp, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// stillDeletable checks the local facts an operator's deletion order
// needs, when it is given and again when it is due: no live partition
// directory in the log dirs holds that incarnation (tierd would tier it
// again: a disk unmounted while the order was given, say), and, without
// a cluster, no other tierd holds the partition's lease (its copies are
// in use).
func (c *Copier) stillDeletable(ctx context.Context, tp remotelog.TopicPartition, topicID string) error {
	dir, id, ok := c.liveDir(tp)
	switch {
	case ok && id == "":
		return fmt.Errorf("%w: %s is a live partition directory with no topic id (no partition.metadata), so tierd cannot tell it from the "+
			"incarnation to delete and would tier it again; delete the topic in Kafka first (its partition directories then go) or move "+
			"the directory away; --topic-id cannot help while the directory has none", ErrTopicStillLocal, dir)
	case ok && topicID == "":
		return fmt.Errorf("%w: %s (topic id %q) is a live partition directory, and the copies to delete have no topic id, so tierd cannot "+
			"tell them apart from it; delete the topic in Kafka first (its partition directories then go) or move the directory away",
			ErrTopicStillLocal, dir, id)
	case ok && id == topicID:
		return fmt.Errorf("%w: %s holds topic id %q, the incarnation to delete (%q); delete the topic in Kafka first (its partition "+
			"directories then go), or give --topic-id of an older incarnation", ErrTopicStillLocal, dir, id, topicID)
	}
	if c.cl != nil || c.cfg.OwnershipLease <= 0 {
		return nil
	}
	l, ok, err := c.rs.ReadLease(ctx, tp)
	if err != nil {
		return fmt.Errorf("read the partition's ownership lease: %w", err)
	}
	if ok && l.InstanceID != c.cfg.InstanceID && !l.Free(c.now().UnixMilli(), c.cfg.OwnershipLease.Milliseconds()) {
		return fmt.Errorf("%w: %s is tiered by another tierd (broker %d, instance %s, lease renewed %s); run the command there",
			ErrHeldElsewhere, tp, l.BrokerID, l.InstanceID, time.UnixMilli(l.RenewedAtMs()).UTC().Format(time.RFC3339))
	}
	return nil
}

// confirmGone asks the cluster whether a topic is gone, for a deletion
// when it is ordered and when it is due: by its topic id, or by its name
// when the copies have none.
func (c *Copier) confirmGone(ctx context.Context, topic, id string) (string, error) {
	if id == "" {
		return c.confirmNameGone(ctx, topic)
	}
	return c.confirmIDGone(ctx, id)
}

// confirmIDGone returns the cluster's proof that a topic id is gone;
// ErrTopicStillExists when it says the id exists, ErrNotConfirmed when
// it answers anything else (an authorization failure hides a topic that
// exists: a deleted topic's id always answers UNKNOWN_TOPIC_ID), and
// ErrClusterUnreachable when it cannot be asked.
func (c *Copier) confirmIDGone(ctx context.Context, id string) (string, error) {
	st, err := c.idStatus(ctx, id)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: %v; tierd will not delete without its answer", ErrClusterUnreachable, err)
	case st.State == cluster.IDExists:
		return "", fmt.Errorf("%w: topic id %s is topic %s: %s", ErrTopicStillExists, id, st.Name, st.Proof)
	case st.State != cluster.IDGone:
		return "", fmt.Errorf("%w: topic id %s: %s", ErrNotConfirmed, id, st.Proof)
	}
	return "confirmed by the cluster: " + st.Proof, nil
}

// confirmNameGone checks, for copies recorded without a topic id, that
// the cluster does not list the topic name.
func (c *Copier) confirmNameGone(ctx context.Context, topic string) (string, error) {
	v, err := c.cl.Describe(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %v; tierd will not delete without its answer", ErrClusterUnreachable, err)
	}
	if err := c.checkClusterID(v.ClusterID); err != nil {
		return "", err
	}
	if _, ok := v.Topics[topic]; ok {
		return "", fmt.Errorf("%w: topic %s is listed by cluster %s", ErrTopicStillExists, topic, v.ClusterID)
	}
	return fmt.Sprintf("cluster %s does not list topic %s (%s, %s)", v.ClusterID, topic, v.Source, v.At.UTC().Format(time.RFC3339)), nil
}

// liveDir finds a live partition directory of tp in the log dirs and its
// topic id ("" when it has none or it is unreadable).
func (c *Copier) liveDir(tp remotelog.TopicPartition) (string, string, bool) {
	for _, dir := range c.cfg.LogDirs {
		p := filepath.Join(dir, tp.String())
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			id, _ := kafkalog.ReadTopicID(p)
			return p, id, true
		}
	}
	return "", "", false
}

// RestorePartition cancels a scheduled deletion of a partition's remote
// copies within the grace period and puts them back (incarnation topicID,
// or the only one scheduled when ""). who is journaled.
func (c *Copier) RestorePartition(ctx context.Context, tp remotelog.TopicPartition, topicID, who string) (remotelog.PartitionDeletion, error) {
	if err := c.lockPass(ctx); err != nil {
		return remotelog.PartitionDeletion{}, err
	}
	defer c.mu.Unlock()
	_, ds, err := c.pendingIDs(tp)
	if err != nil {
		return remotelog.PartitionDeletion{}, err
	}
	var match []remotelog.PartitionDeletion
	for _, d := range ds {
		if topicID == "" || d.TopicID == topicID {
			match = append(match, d)
		}
	}
	switch {
	case len(match) == 0:
		return remotelog.PartitionDeletion{}, fmt.Errorf("%w: %s (topic id %q)", ErrNothingScheduled, tp, topicID)
	case len(match) > 1:
		var ids []string
		for _, d := range match {
			ids = append(ids, d.TopicID)
		}
		return remotelog.PartitionDeletion{}, fmt.Errorf("%w: %s: %s", ErrSeveralIncarnated, tp, strings.Join(ids, ", "))
	}
	d, err := c.store.CancelDeletion(tp, match[0].TopicID, fmt.Sprintf("restored by 'tierd partitions restore %s' by %s at %s", tp, who, c.now().UTC().Format(time.RFC3339)), true)
	if err != nil {
		return d, err
	}
	c.needSweep(tp)
	c.log.Warn("scheduled deletion cancelled; the copies are live again", "partition", tp, "topic_id", d.TopicID, "by", who)
	d.State = remotelog.DeletionCancelled
	return d, nil
}
