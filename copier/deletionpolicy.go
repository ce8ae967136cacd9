package copier

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// deleteOnDisable schedules the deletion of every remote copy of a
// partition whose topic's configuration turns tiering off and orders its
// remote data deleted (KIP-950). That explicit configuration is the
// proof; it is journaled with the values and their sources, the deletion
// waits out remote.log.delete.delay.ms like every whole-partition
// deletion, and runs only if the configuration still says so then
// (turning tiering back on cancels it). A partition whose directory holds
// another incarnation than the recorded one is left to the incarnation
// checks: the configuration speaks for the topic as it is now. Copies an
// operator restored ("tierd partitions restore") are not scheduled again
// on the configuration alone.
func (w *partitionDeletions) deleteOnDisable(p *partition, st topicSettings) error {
	w.say.wait(p.tp, remotelog.WaitTieringDisabled, "tiering is off for the topic and its remote copies are to be deleted: "+st.Tiering.String())
	if !st.known {
		return nil
	}
	off, ok, err := w.store.Offsets(p.tp)
	if err != nil || !ok {
		return err // nothing recorded: nothing to delete
	}
	if off.OperatorKept != "" {
		if w.say.once("disable-kept " + p.tp.String()) {
			w.log.Warn("tiering is off with remote.log.delete.on.disable, but an operator restored the copies: not deleting them on the configuration alone; "+
				"'tierd topics delete' orders it", "partition", p.tp, "restored", off.OperatorKept)
		}
		return nil
	}
	if id, err := kafkalog.ReadTopicID(p.dir); err == nil && id != "" && off.TopicID != "" && id != off.TopicID {
		if w.say.once("disable-incarnation " + p.tp.String()) {
			w.log.Warn("tiering is off with remote.log.delete.on.disable, but the directory's topic id is not the recorded one: not deleting",
				"partition", p.tp, "dir_topic_id", id, "recorded_topic_id", off.TopicID)
		}
		return nil
	}
	file := "tierd.yaml"
	if w.cfg.Source != "" {
		file = w.cfg.Source
	}
	proof := fmt.Sprintf("configuration orders it: topic %s has %s (copier.* keys from %s, cluster values as read by the pass at %s)",
		p.tp.Topic, st.Tiering, file, w.now().UTC().Format(time.RFC3339))
	_, err = w.schedule(p.tp, off.TopicID, remotelog.ReasonTieringDisabled, proof)
	return err
}

// reenabled cancels a pending deletion that a tiering-disabled policy
// ordered, now that the topic is tiered again: its copies are live again
// before the partition is tiered.
func (w *partitionDeletions) reenabled(p *partition, st topicSettings) error {
	ds, err := w.store.Deletions(&p.tp)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if d.Reason != remotelog.ReasonTieringDisabled || d.State != remotelog.DeletionPending {
			continue
		}
		detail := "cancelled: the topic is tiered again: " + st.Tiering.String()
		if _, err := w.store.CancelDeletion(p.tp, d.TopicID, detail, false); err != nil {
			return err
		}
		w.needSweep(p.tp)
		w.log.Warn("scheduled deletion cancelled: tiering is on again for the topic; its copies are live again",
			"partition", p.tp, "topic_id", d.TopicID, "policy", st.Tiering.String())
	}
	return nil
}

// errPolicyChanged: a due tiering-disabled deletion whose policy no
// longer orders it.
var errPolicyChanged = errors.New("copier: the topic's tiering policy no longer orders the deletion")

// errTopicNotInCluster: a due tiering-disabled deletion whose topic the
// configured cluster no longer lists, so that the topic's configs, which
// may order the deletion or forbid it, cannot be read.
var errTopicNotInCluster = errors.New("copier: the topic is not in the kafka cluster's metadata, so its topic configs cannot be read")

// recheckPolicy is a due tiering-disabled deletion's proof, checked
// again: the configuration must still turn tiering off and order the
// deletion. It returns the policy for the journal, errPolicyChanged when
// it no longer orders it, or an error to wait on (the cluster's configs
// for the topic unknown; errTopicNotInCluster when the cluster no longer
// lists the topic: tierd.yaml alone is no proof then, and neither
// deleting nor cancelling on it is safe).
func (w *partitionDeletions) recheckPolicy(ctx context.Context, d remotelog.PartitionDeletion) (string, error) {
	if w.cl != nil && w.views.currentView() == nil {
		return "", fmt.Errorf("%w: the deletion waits for the cluster's topic configs", ErrClusterUnreachable)
	}
	if v, err := w.views.freshView(); err == nil && w.cfg.ClusterTopicConfigs {
		if _, ok := v.Topics[d.TopicPartition.Topic]; !ok {
			return "", fmt.Errorf("%w (topic %s)", errTopicNotInCluster, d.TopicPartition.Topic)
		}
	}
	st := w.settings(d.TopicPartition.Topic)
	switch {
	case !st.known:
		return "", fmt.Errorf("%w: the topic's configs were not read from the cluster; the deletion waits", ErrClusterUnreachable)
	case !st.Tiering.DeletesRemote():
		return "", fmt.Errorf("%w: %s", errPolicyChanged, st.Tiering)
	}
	return "the configuration still orders it: " + st.Tiering.String(), ctx.Err()
}
