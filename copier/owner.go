package copier

import (
	"context"
	"fmt"

	"github.com/tierd/tierd/copier/retention"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// checkIncarnation compares the partition directory with what the store
// recorded, and holds the partition (errHeld) on any evidence it will not
// act on by itself: a partition.metadata that is not what Kafka writes, a
// recorded topic id whose file vanished, a different topic id (a
// re-created topic, or a stale directory: the old incarnation's copies
// are scheduled for deletion only once the cluster confirms its id gone,
// see resolveTopicID), or, without topic ids, a local log that restarts
// below the recorded local log start offset with other contents. None of
// these deletes anything.
func (c *Copier) checkIncarnation(ctx context.Context, p *partition) error {
	id, err := kafkalog.ReadTopicID(p.dir)
	if err != nil {
		return c.hold(p.tp, heldPartitionMetadata, err.Error())
	}
	p.topicID = id
	_, pending, err := c.deletions().pendingIDs(p.tp)
	if err != nil {
		return err
	}
	for _, d := range pending {
		if d.TopicID == id {
			return c.hold(p.tp, heldDeletionPending, fmt.Sprintf("%s holds topic id %q, whose remote copies are scheduled for deletion (%s); "+
				"'tierd partitions restore --config <tierd.yaml> %s' cancels it", p.dir, id, d.Reason, p.tp))
		}
	}
	if err := c.checkClusterTopicID(p); err != nil {
		return err
	}
	off, ok, err := c.store.Offsets(p.tp)
	if err != nil || !ok {
		return err
	}
	switch {
	case id == "" && off.TopicID != "":
		return c.hold(p.tp, heldTopicIDMissing, fmt.Sprintf("tierd recorded topic id %s, and %s has no %s",
			off.TopicID, p.dir, kafkalog.PartitionMetadataFile))
	case id != "" && off.TopicID != "" && id != off.TopicID:
		return c.resolveTopicID(ctx, p, off)
	case id != "" && off.TopicID == "":
		return c.store.SetTopicID(p.tp, id)
	case id != "" && id == off.TopicID:
		return nil // the same incarnation: a replica rebuilt from the leader may start lower
	}
	// Segments below the recorded local log start offset are legitimate
	// only when a crash interrupted their deletion: then each has a
	// finished copy of exactly its contents.
	fin, err := c.store.FinishedSegments(p.tp)
	if err != nil {
		return err
	}
	stale := false
	for _, s := range p.segs {
		if s.base >= off.LocalLogStartOffset {
			break
		}
		stale = stale || !copiedExactly(fin, s)
	}
	if stale {
		c.m.incarnation.Inc()
		return c.hold(p.tp, heldLogRestarted, fmt.Sprintf("local log starts at %d, below the local log start offset %d tierd recorded, "+
			"with other contents (was the topic deleted and re-created?); resolve it with 'tierd topics delete --config <tierd.yaml> "+p.tp.Topic+"' once the old data may go",
			p.segs[0].base, off.LocalLogStartOffset))
	}
	return nil
}

// copiedExactly reports whether a finished row is a copy of exactly this
// local segment (retention.CopiedExactly): only such a copy allows the
// local segment to be deleted.
func copiedExactly(fin []remotelog.SegmentMetadata, s localSegment) bool {
	return retention.CopiedExactly(fin, s.seg())
}
