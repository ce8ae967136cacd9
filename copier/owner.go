package copier

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// errIncarnation stops work on a partition whose local log no longer
// matches what tierd recorded for it.
var errIncarnation = errors.New("copier: local log does not match the recorded partition")

// checkIncarnation compares the partition directory with what the store
// recorded. A new topic id (the topic was deleted and re-created under the
// same name) retires the old incarnation: its copies are deleted and the
// partition starts over. Without topic ids, a local log that starts below
// the local log start offset tierd recorded, with segments no finished copy
// matches, is refused, since its offsets would be read as ones already
// tiered or deleted.
func (c *Copier) checkIncarnation(ctx context.Context, p *partition) error {
	id, err := kafkalog.ReadTopicID(p.dir)
	if err != nil {
		return err
	}
	p.topicID = id
	off, ok, err := c.store.Offsets(p.tp)
	if err != nil || !ok {
		return err
	}
	switch {
	case id != "" && off.TopicID != "" && id != off.TopicID:
		c.log.Warn("topic was re-created: deleting the old incarnation's remote copies", "partition", p.tp, "old_topic_id", off.TopicID, "topic_id", id)
		rows, err := c.store.Segments(p.tp)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.State != remotelog.DeleteSegmentFinished {
				if err := c.deleteRemote(ctx, r); err != nil {
					return err
				}
			}
		}
		start := int64(0)
		if len(p.segs) > 0 {
			start = p.segs[0].base
		}
		c.m.recreated.Inc()
		return c.store.ResetPartition(p.tp, start, id)
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
		if c.once(fmt.Sprintf("incarnation %s %d", p.tp, p.segs[0].base)) {
			c.m.incarnation.Inc()
			c.log.Error("local log starts below the local log start offset tierd recorded; was the topic deleted and re-created? "+
				"tierd leaves the partition alone until its metadata is cleared", "partition", p.tp, "local_start", p.segs[0].base, "recorded", off.LocalLogStartOffset)
		}
		return fmt.Errorf("%w: local log starts at %d, below the recorded local log start offset %d", errIncarnation, p.segs[0].base, off.LocalLogStartOffset)
	}
	return nil
}

// copiedExactly reports whether a finished row is a copy of exactly this
// local segment: same offsets and same size. Only such a copy allows the
// local segment to be deleted; a row restored from foreign or older
// manifests with other contents never does.
func copiedExactly(fin []remotelog.SegmentMetadata, s localSegment) bool {
	for _, r := range fin {
		if r.StartOffset == s.base && r.EndOffset == s.end && r.SizeInBytes == s.size {
			return true
		}
	}
	return false
}

// deletePartition deletes the remote copies of a partition whose topic was
// deleted (the broker renamed its directory "<topic>-<p>.<uuid>-delete"),
// as Kafka does for tiered topics. Only the lease holder does it, and only
// for the incarnation the directory belongs to.
func (c *Copier) deletePartition(ctx context.Context, tp remotelog.TopicPartition, dir string) error {
	off, ok, err := c.store.Offsets(tp)
	if err != nil || !ok {
		return err
	}
	id, err := kafkalog.ReadTopicID(dir)
	if err != nil {
		return err
	}
	if id != "" && off.TopicID != "" && id != off.TopicID {
		return nil // an older incarnation's directory
	}
	rows, err := c.store.Segments(tp)
	if err != nil {
		return err
	}
	pending := false
	for _, r := range rows {
		pending = pending || r.State != remotelog.DeleteSegmentFinished
	}
	if !pending {
		return nil
	}
	if own, err := c.claim(ctx, tp); err != nil || !own {
		return err
	}
	c.log.Info("topic deleted: deleting its remote copies", "partition", tp)
	for _, r := range rows {
		if r.State != remotelog.DeleteSegmentFinished {
			if err := c.deleteRemote(ctx, r); err != nil {
				return err
			}
		}
	}
	return c.store.ResetPartition(tp, 0, "")
}
