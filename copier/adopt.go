package copier

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// adoptPartition makes sure the metadata store knows the partition. A
// partition the store has never seen (a new partition, a lost or deleted
// Pebble directory, or a partition whose ownership moved to this tierd)
// gets its rows rebuilt from the manifests in the bucket; its log start
// offset is the lowest manifest start offset, or the first local offset
// when nothing is remote.
func (c *Copier) adoptPartition(ctx context.Context, p *partition) (int, error) {
	if _, ok, err := c.store.Offsets(p.tp); err != nil || ok {
		return 0, err
	}
	mfs, err := c.rs.Manifests(ctx, p.tp)
	if err != nil {
		// A partial rebuild would make whole copies look like orphans:
		// try again next pass.
		return 0, fmt.Errorf("rebuild metadata from the bucket: %w", err)
	}
	if mfs, err = c.adoptable(p.tp, p.topicID, mfs); err != nil {
		return 0, err
	}
	lso := int64(-1)
	if len(p.segs) > 0 {
		lso = p.segs[0].base
	}
	for _, mf := range mfs {
		if lso < 0 || mf.StartOffset < lso {
			lso = mf.StartOffset
		}
	}
	if lso < 0 {
		return 0, nil // nothing local, nothing remote
	}
	if err := c.store.EnsurePartition(p.tp, lso); err != nil {
		return 0, err
	}
	if p.topicID != "" {
		if err := c.store.SetTopicID(p.tp, p.topicID); err != nil {
			return 0, err
		}
	}
	for i, mf := range mfs {
		if err := c.store.ImportSegment(mf.Metadata()); err != nil {
			return i, err
		}
		c.m.rebuilt.Inc()
	}
	if len(mfs) > 0 {
		c.log.Info("rebuilt remote metadata from the bucket", "partition", p.tp, "segments", len(mfs), "log_start_offset", lso)
		if len(p.segs) > 0 {
			if err := c.advanceOffsets(p.tp, -1, p.segs[0].base); err != nil {
				return len(mfs), err
			}
		}
	}
	c.needSweep(p.tp) // copies without a manifest are orphans now
	return len(mfs), nil
}

// adoptable keeps the manifests a partition of incarnation topicID may
// take rows from: that incarnation's copies and those from before topic
// ids, never another incarnation's nor those whose deletion is scheduled,
// nor a broker's (brokerOwned: made through the RSM endpoint, owned by
// the broker's metadata; they live under a prefix of their own, so none
// should be found here).
func (c *Copier) adoptable(tp remotelog.TopicPartition, topicID string, mfs []*rsm.Manifest) ([]*rsm.Manifest, error) {
	pending, _, err := c.deletions().pendingIDs(tp)
	if err != nil {
		return nil, err
	}
	kept := make([]*rsm.Manifest, 0, len(mfs))
	for _, mf := range mfs {
		if (topicID == "" || mf.TopicID == topicID || mf.TopicID == "") && !pending[mf.SegmentID] && !mf.BrokerOwned {
			kept = append(kept, mf)
		}
	}
	return kept, nil
}

// needSweep asks for the partition's bucket objects to be checked against
// its rows on the next pass.
func (c *Copier) needSweep(tp remotelog.TopicPartition) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.swept[tp] = false
}

// maybeSweep deletes the partition's objects that belong to no live copy
// and aborts its incomplete multipart uploads, on the first pass after
// start and after a failure (no copy of the partition is in flight then).
// It deletes the objects of copies whose rows are dead (deleted, or left
// unfinished by a crash) and of copies nobody recorded that have no
// manifest (interrupted uploads). A copy with a manifest that the store
// does not know is kept: it is whole, and may be another writer's or one
// a partial rebuild missed.
func (c *Copier) maybeSweep(ctx context.Context, tp remotelog.TopicPartition) error {
	c.stateMu.Lock()
	done := c.swept[tp]
	c.stateMu.Unlock()
	if done {
		return nil
	}
	rows, err := c.store.Segments(tp)
	if err != nil {
		return err
	}
	state := map[remotelog.SegmentID]remotelog.SegmentState{}
	for _, r := range rows {
		state[r.ID] = r.State
	}
	n, err := c.rs.SweepPartition(ctx, tp, func(id remotelog.SegmentID, hasManifest bool) bool {
		st, known := state[id]
		return st == remotelog.CopySegmentFinished || (!known && hasManifest)
	})
	if n > 0 {
		c.m.swept.Add(float64(n))
		c.log.Info("deleted objects no live row points at", "partition", tp, "objects", n)
	}
	if err != nil {
		return fmt.Errorf("sweep bucket: %w", err)
	}
	c.stateMu.Lock()
	c.swept[tp] = true
	c.stateMu.Unlock()
	return nil
}

// Rebuild restores the metadata of every partition in the log dirs, and of
// extra partitions, from the manifests in the bucket, for partitions the
// store does not know (use it on an empty store: "tierd rlmm rebuild").
// It returns how many segment rows it restored.
func (c *Copier) Rebuild(ctx context.Context, extra []remotelog.TopicPartition) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := map[remotelog.TopicPartition]*partition{}
	for _, dir := range c.cfg.LogDirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			if tp, ok := kafkalog.ParsePartitionDir(e.Name()); ok && e.IsDir() && c.tiered(tp) {
				p := &partition{tp: tp, dir: filepath.Join(dir, e.Name())}
				if p.segs, err = listSegments(p.dir); err != nil {
					return 0, err
				}
				if p.topicID, err = kafkalog.ReadTopicID(p.dir); err != nil {
					return 0, err
				}
				parts[tp] = p
			}
		}
	}
	for _, tp := range extra {
		if parts[tp] == nil {
			parts[tp] = &partition{tp: tp}
		}
	}
	total := 0
	for _, p := range parts {
		n, err := c.adoptPartition(ctx, p)
		total += n
		if err != nil {
			return total, fmt.Errorf("%s: %w", p.tp, err)
		}
	}
	return total, nil
}
