package copier

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

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
// as the proof's author. It waits for the running pass to end (an error
// wrapping ctx's when ctx ends first). It refuses (ErrTopicStillLocal)
// while a live partition directory of the topic holds the same
// incarnation (tierd would tier it again), and, with a cluster,
// (ErrTopicStillExists) when the cluster says the topic id, or for copies
// without a topic id the topic name, still exists, or when the cluster
// cannot be asked; and (ErrLogDirUnavailable) while a configured log dir
// is missing or unreadable, now or in the last pass: it may hold the
// topic's partitions. ErrNothingToDelete: tierd recorded no copies of it.
func (c *Copier) DeleteTopic(ctx context.Context, topic, topicID, who string) ([]remotelog.PartitionDeletion, error) {
	if err := c.lockPass(ctx); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	return c.deletions().deleteTopic(ctx, topic, topicID, who)
}

// RestorePartition cancels a scheduled deletion of a partition's remote
// copies within the grace period and puts them back (incarnation topicID,
// or the only one scheduled when ""). who is journaled. It waits for the
// running pass to end (an error wrapping ctx's when ctx ends first).
// ErrNothingScheduled: no such deletion is pending; ErrSeveralIncarnated:
// several are and topicID is "".
func (c *Copier) RestorePartition(ctx context.Context, tp remotelog.TopicPartition, topicID, who string) (remotelog.PartitionDeletion, error) {
	if err := c.lockPass(ctx); err != nil {
		return remotelog.PartitionDeletion{}, err
	}
	defer c.mu.Unlock()
	return c.deletions().restore(tp, topicID, who)
}

// deleteTopic is DeleteTopic's work, the pass lock held.
func (w *partitionDeletions) deleteTopic(ctx context.Context, topic, topicID, who string) ([]remotelog.PartitionDeletion, error) {
	if bad := w.dirs.unavailableDirs(); bad != "" {
		return nil, fmt.Errorf("%w: %s; it may hold partitions of %s, so tierd accepts no deletion until it is back (restore it, or remove it "+
			"from copier.log_dirs and restart tierd)", ErrLogDirUnavailable, bad, topic)
	}
	tps, err := w.store.Partitions()
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
		off, ok, err := w.store.Offsets(tp)
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
		if err := w.stillDeletable(ctx, t.tp, t.id); err != nil {
			return nil, err
		}
		if _, done := notes[t.id]; done {
			continue
		}
		notes[t.id] = "no kafka cluster configured"
		if w.cl != nil {
			note, err := w.confirmGone(ctx, topic, t.id)
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
		proof := fmt.Sprintf("operator order '%s' by %s at %s; %s", order, who, w.now().UTC().Format(time.RFC3339), notes[t.id])
		d, err := w.schedule(t.tp, t.id, remotelog.ReasonOperator, proof)
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
func (w *partitionDeletions) stillDeletable(ctx context.Context, tp remotelog.TopicPartition, topicID string) error {
	dir, id, ok := w.liveDir(tp)
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
	if w.cl != nil || w.cfg.OwnershipLease <= 0 {
		return nil
	}
	l, ok, err := w.rs.ReadLease(ctx, tp)
	if err != nil {
		return fmt.Errorf("read the partition's ownership lease: %w", err)
	}
	if ok && l.InstanceID != w.cfg.InstanceID && !l.Free(w.now().UnixMilli(), w.cfg.OwnershipLease.Milliseconds()) {
		return fmt.Errorf("%w: %s is tiered by another tierd (broker %d, instance %s, lease renewed %s); run the command there",
			ErrHeldElsewhere, tp, l.BrokerID, l.InstanceID, time.UnixMilli(l.RenewedAtMs()).UTC().Format(time.RFC3339))
	}
	return nil
}

// confirmGone asks the cluster whether a topic is gone, for a deletion
// when it is ordered and when it is due: by its topic id, or by its name
// when the copies have none.
func (w *partitionDeletions) confirmGone(ctx context.Context, topic, id string) (string, error) {
	if id == "" {
		return w.confirmNameGone(ctx, topic)
	}
	return w.confirmIDGone(ctx, id)
}

// confirmIDGone returns the cluster's proof that a topic id is gone;
// ErrTopicStillExists when it says the id exists, ErrNotConfirmed when
// it answers anything else (an authorization failure hides a topic that
// exists: a deleted topic's id always answers UNKNOWN_TOPIC_ID), and
// ErrClusterUnreachable when it cannot be asked.
func (w *partitionDeletions) confirmIDGone(ctx context.Context, id string) (string, error) {
	st, err := w.views.idStatus(ctx, id)
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
func (w *partitionDeletions) confirmNameGone(ctx context.Context, topic string) (string, error) {
	v, err := w.cl.Describe(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %v; tierd will not delete without its answer", ErrClusterUnreachable, err)
	}
	if err := w.views.checkClusterID(v.ClusterID); err != nil {
		return "", err
	}
	if _, ok := v.Topics[topic]; ok {
		return "", fmt.Errorf("%w: topic %s is listed by cluster %s", ErrTopicStillExists, topic, v.ClusterID)
	}
	return fmt.Sprintf("cluster %s does not list topic %s (%s, %s)", v.ClusterID, topic, v.Source, v.At.UTC().Format(time.RFC3339)), nil
}

// liveDir finds a live partition directory of tp in the log dirs and its
// topic id ("" when it has none or it is unreadable).
func (w *partitionDeletions) liveDir(tp remotelog.TopicPartition) (string, string, bool) {
	for _, dir := range w.cfg.LogDirs {
		p := filepath.Join(dir, tp.String())
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			id, _ := kafkalog.ReadTopicID(p)
			return p, id, true
		}
	}
	return "", "", false
}

// restore is RestorePartition's work, the pass lock held.
func (w *partitionDeletions) restore(tp remotelog.TopicPartition, topicID, who string) (remotelog.PartitionDeletion, error) {
	_, ds, err := w.pendingIDs(tp)
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
	d, err := w.store.CancelDeletion(tp, match[0].TopicID, fmt.Sprintf("restored by 'tierd partitions restore %s' by %s at %s", tp, who, w.now().UTC().Format(time.RFC3339)), true)
	if err != nil {
		return d, err
	}
	w.needSweep(tp)
	w.log.Warn("scheduled deletion cancelled; the copies are live again", "partition", tp, "topic_id", d.TopicID, "by", who)
	d.State = remotelog.DeletionCancelled
	return d, nil
}
