package copier

import (
	"context"
	"fmt"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// claim decides whether this tierd may work on a partition now, by the
// ownership lease in the bucket (see rsm.Owner): several tierds, one per
// broker, can share a bucket while each partition has one writer. A lease
// held by another broker id and renewed within OwnershipLease makes the
// partition someone else's; an absent or expired lease is taken, and ours
// is renewed every third of the lease. With OwnershipLease 0 every
// partition is ours.
func (c *Copier) claim(ctx context.Context, tp remotelog.TopicPartition) (bool, error) {
	lease := c.cfg.OwnershipLease
	if lease <= 0 {
		return true, nil
	}
	now := c.now()
	c.stateMu.Lock()
	renewed, held := c.leases[tp]
	c.stateMu.Unlock()
	if held && now.Sub(renewed) < lease/3 {
		return true, nil
	}
	o, ok, err := c.rs.ReadOwner(ctx, tp)
	if err != nil {
		return false, fmt.Errorf("read ownership lease: %w", err)
	}
	if ok && o.BrokerID != c.cfg.BrokerID && now.Sub(time.UnixMilli(o.RenewedMs)) < lease {
		c.dropLease(tp)
		if c.once(fmt.Sprintf("owned %s %d", tp, o.BrokerID)) {
			c.log.Info("partition is tiered by another tierd; skipping it while its lease lasts", "partition", tp, "owner_broker_id", o.BrokerID)
		}
		return false, nil
	}
	takeover := ok && o.BrokerID != c.cfg.BrokerID
	if takeover {
		c.log.Warn("taking over a partition whose ownership lease expired", "partition", tp, "previous_owner", o.BrokerID)
		c.needSweep(tp)
	}
	mine := rsm.Owner{BrokerID: c.cfg.BrokerID, RenewedMs: now.UnixMilli()}
	if err := c.rs.WriteOwner(ctx, tp, mine); err != nil {
		return false, fmt.Errorf("write ownership lease: %w", err)
	}
	// Read back: when two tierds race for a free lease, the last write
	// wins and the other backs off.
	if o, ok, err = c.rs.ReadOwner(ctx, tp); err != nil || !ok || o.BrokerID != c.cfg.BrokerID {
		c.dropLease(tp)
		return false, err
	}
	c.stateMu.Lock()
	c.leases[tp] = now
	c.stateMu.Unlock()
	if takeover {
		// The other owner copied and deleted meanwhile: bring the rows
		// in line with the bucket before acting on them.
		if err := c.reconcile(ctx, tp); err != nil {
			c.dropLease(tp)
			return false, err
		}
	}
	return true, nil
}

// reconcile makes the rows of a partition whose store may be stale (it was
// tiered by another tierd) agree with the manifests in the bucket:
// finished rows whose manifest is gone were deleted by the other owner,
// and manifests without a row are the other owner's copies. It needs every
// manifest to be readable, and fails otherwise.
func (c *Copier) reconcile(ctx context.Context, tp remotelog.TopicPartition) error {
	mfs, err := c.rs.Manifests(ctx, tp)
	if err != nil {
		return fmt.Errorf("reconcile with the bucket: %w", err)
	}
	inBucket := map[remotelog.SegmentID]bool{}
	for _, mf := range mfs {
		inBucket[mf.SegmentID] = true
	}
	rows, err := c.store.Segments(tp)
	if err != nil {
		return err
	}
	known := map[remotelog.SegmentID]bool{}
	for _, r := range rows {
		known[r.ID] = true
		if r.State == remotelog.CopySegmentFinished && !inBucket[r.ID] {
			if err := c.deleteRemote(ctx, r); err != nil { // objects already gone: records the delete
				return err
			}
		}
	}
	for _, mf := range mfs {
		if !known[mf.SegmentID] {
			if err := c.store.ImportSegment(mf.Metadata()); err != nil {
				return err
			}
			c.m.rebuilt.Inc()
		}
	}
	if fin, err := c.store.FinishedSegments(tp); err == nil && len(fin) > 0 {
		_, err = c.store.AdvanceOffsets(tp, fin[0].StartOffset, -1)
		return err
	}
	return nil
}

func (c *Copier) dropLease(tp remotelog.TopicPartition) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	delete(c.leases, tp)
}

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
	_, pending, err := c.pendingIDs(p.tp)
	if err != nil {
		return err
	}
	for _, d := range pending {
		if d.TopicID == id {
			return c.hold(p.tp, heldDeletionPending, fmt.Sprintf("%s holds topic id %q, whose remote copies are scheduled for deletion (%s); "+
				"'tierd partitions restore %s' cancels it", p.dir, id, d.Reason, p.tp))
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
			"with other contents (was the topic deleted and re-created?); resolve it with 'tierd topics delete' once the old data may go",
			p.segs[0].base, off.LocalLogStartOffset))
	}
	return nil
}

// copiedExactly reports whether a finished row is a copy of exactly this
// local segment: same offsets, and the local .log's size is the copy's, or
// the size of the file a copy that left out a zero tail was made from
// (LocalSizeInBytes). Only such a copy allows the local segment to be
// deleted; a row restored from foreign or older manifests with other
// contents, or a file that changed size since its copy, never does.
func copiedExactly(fin []remotelog.SegmentMetadata, s localSegment) bool {
	for _, r := range fin {
		sameSize := r.SizeInBytes == s.size || (r.LocalSizeInBytes > 0 && r.LocalSizeInBytes == s.size)
		if r.StartOffset == s.base && r.EndOffset == s.end && sameSize {
			return true
		}
	}
	return false
}
