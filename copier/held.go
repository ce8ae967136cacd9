package copier

import (
	"errors"
	"fmt"

	"github.com/tierd/tierd/internal/remotelog"
)

// errHeld stops work on a partition whose local evidence tierd will not
// act on (see the reasons below): it is neither tiered nor trimmed, and no
// remote data of it is deleted, until the evidence changes.
var errHeld = errors.New("copier: partition held")

// Reasons a partition is held. Each is local evidence with more than one
// explanation; none of them ever deletes remote data.
const (
	// heldPartitionMetadata: partition.metadata is unreadable, empty,
	// truncated or not what a broker writes.
	heldPartitionMetadata = "partition_metadata_invalid"
	// heldTopicIDMissing: tierd recorded a topic id for the partition,
	// and its directory now has no partition.metadata.
	heldTopicIDMissing = "topic_id_missing"
	// heldTopicIDChanged: the directory's topic id differs from the
	// recorded one (a re-created topic, or a stale directory), and the
	// cluster has not confirmed the recorded id gone.
	heldTopicIDChanged = "topic_id_changed"
	// heldTopicIDNotInCluster: the directory's topic id is not the one
	// the cluster has for the topic name.
	heldTopicIDNotInCluster = "topic_id_not_in_cluster"
	// heldLogRestarted: without topic ids, the local log starts below
	// the recorded local log start offset with other contents.
	heldLogRestarted = "log_restarted_lower"
	// heldDuplicateDir: the partition is live in two log dirs at once.
	heldDuplicateDir = "duplicate_partition_dir"
	// heldFenced: the cluster names this broker leader at an epoch below
	// the partition's fence in the bucket (a stale view).
	heldFenced = "fenced_by_newer_epoch"
	// heldDeletionPending: a deletion of the recorded incarnation is
	// scheduled and the directory still holds that incarnation.
	heldDeletionPending = "deletion_pending"
	// heldLogDirUnavailable: a configured log dir is missing or
	// unreadable, and no log dir tierd could read holds the partition: it
	// may be in the missing one.
	heldLogDirUnavailable = "log_dir_unavailable"
)

var heldReasons = []string{heldPartitionMetadata, heldTopicIDMissing, heldTopicIDChanged, heldTopicIDNotInCluster,
	heldLogRestarted, heldDuplicateDir, heldDeletionPending, heldFenced, heldLogDirUnavailable}

// hold records that a partition is held this pass for reason, logs it
// once per distinct detail, and returns the error to stop its sync with.
func (c *Copier) hold(tp remotelog.TopicPartition, reason, detail string) error {
	c.stateMu.Lock()
	c.held[tp] = reason
	c.stateMu.Unlock()
	c.rep.waitHeld(tp, remotelog.WaitHeld, reason, "held ("+reason+"): tierd neither tiers it nor deletes any of its remote data until this changes: "+detail)
	if c.once(fmt.Sprintf("held %s %s %s", tp, reason, detail)) {
		c.m.heldTotal.WithLabelValues(reason).Inc()
		c.log.Error("partition held: tierd neither tiers it nor deletes any of its remote data until this changes",
			"partition", tp, "reason", reason, "detail", detail)
	}
	return fmt.Errorf("%w (%s): %s", errHeld, reason, detail)
}

// publishHeld sets the held-partitions gauge from this pass and starts
// the next pass's count afresh.
func (c *Copier) publishHeld() {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	n := map[string]int{}
	for _, r := range c.held {
		n[r]++
	}
	for _, r := range heldReasons {
		c.m.held.WithLabelValues(r).Set(float64(n[r]))
	}
	c.held = map[remotelog.TopicPartition]string{}
}
