package remotecompact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/copier/deleter"
	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// Compact deletes the partition's lost merges (dropLostMerges) and then,
// when o.Enabled, merges at most one run of its copies (Plan chooses it).
// Errors: ErrCompaction wrapping what failed, except the store's in
// reading the rows a plan starts from, returned as they are; a merge that
// failed before its commit is counted in failures_total.
func (c *Compactor) Compact(ctx context.Context, p Partition, o Pass) error {
	if err := c.dropLostMerges(ctx, p.TP); err != nil {
		return fmt.Errorf("%w: %w", ErrCompaction, err)
	}
	if !o.Enabled {
		return nil
	}
	fin, err := c.d.Store.FinishedSegments(p.TP)
	if err != nil {
		return err
	}
	offs, _, err := c.d.Store.Offsets(p.TP)
	if err != nil {
		return err
	}
	run, ok := Plan(fin, p.LocalStart, offs.LogStartOffset, c.d.Now().UnixMilli(), o.Settings)
	if !ok {
		return nil
	}
	committed, err := c.mergeRun(ctx, p, run, o)
	if err != nil && !committed {
		c.m.failures.Inc()
	}
	if err != nil {
		return fmt.Errorf("%w of %s: %w", ErrCompaction, run, err)
	}
	return nil
}

// mergeRun merges one run (see the package comment for the steps) and
// reports whether the merged copy was committed (finished), which an
// error in deleting the copies it replaces does not undo.
func (c *Compactor) mergeRun(ctx context.Context, p Partition, run Run, o Pass) (bool, error) {
	if own, err := p.Renew(ctx); err != nil || !own {
		return false, err
	}
	id := remotelog.NewSegmentID()
	dir := filepath.Join(p.Staging, fmt.Sprintf("compact-%020d-%s", run.Start(), id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	defer func() {
		os.RemoveAll(dir)
		os.Remove(filepath.Dir(dir)) // the staging root, when empty
	}()
	built, err := c.readAndMerge(ctx, dir, run, o)
	if err != nil {
		return false, err
	}
	// The merge may have taken a while: the lease must still be ours.
	if own, err := p.Renew(ctx); err != nil || !own {
		return false, err
	}
	maxTS := built.maxTimestamp
	if maxTS < 0 { // nothing kept has a timestamp: the copies' own
		for _, m := range run.Copies {
			maxTS = max(maxTS, m.MaxTimestampMs)
		}
	}
	files := built.files
	meta := remotelog.SegmentMetadata{
		TopicPartition: p.TP, TopicID: run.Copies[0].TopicID, ID: id, StartOffset: run.Start(), EndOffset: run.End(),
		MaxTimestampMs: maxTS, SizeInBytes: built.size, State: remotelog.CopySegmentStarted, BrokerID: o.BrokerID, InstanceID: o.InstanceID,
		SegmentLeaderEpochs: files.LeaderEpochs, TxnIndexPresent: files.TxnIndex != "", ProducerSnapshotPresent: files.ProducerSnapshot != "",
		Compacted: true, CompactionOf: run.IDs(), Form: o.Form,
	}
	if p.LeaderEpoch >= 0 {
		le := p.LeaderEpoch
		meta.CopyLeaderEpoch = &le
		files.BeforeManifest = func(ctx context.Context) error { return c.d.Bucket.CheckFence(ctx, p.TP, p.TopicID, le) }
	}
	if err := c.d.Store.AddSegment(meta); err != nil {
		return false, err
	}
	crashpoint.Hit("compact.started")
	made, err := c.d.Upload(ctx, meta, files)
	if err != nil {
		return false, c.failedMerge(ctx, meta, err, o)
	}
	crashpoint.Hit("compact.uploaded")
	meta.StoredSizeInBytes, meta.Encrypted = made.StoredSizeInBytes, made.Encrypted
	fin, err := c.d.Store.UpdateStates(p.TP, []remotelog.SegmentMetadata{meta}, remotelog.CopySegmentFinished)
	if err != nil {
		return false, err
	}
	meta = fin[0]
	crashpoint.Hit("compact.finished")
	c.m.merges.Inc()
	c.m.merged.Add(float64(len(run.Copies)))
	c.m.reclaimed.Add(float64(max(run.Bytes-built.size, 0)))
	c.m.recordsDropped.Add(float64(built.recordsRead - built.recordsKept))
	c.d.Log.Info("merged remote copies of a compacted topic into one", "partition", p.TP, "segment", meta.ID, "start_offset", meta.StartOffset,
		"end_offset", meta.EndOffset, "copies", len(run.Copies), "bytes_before", run.Bytes, "bytes", built.size,
		"records_before", built.recordsRead, "records", built.recordsKept, "at_log_start", run.AtLogStart)
	return true, c.deleteMerged(ctx, p.TP, meta, run)
}

// readAndMerge downloads the run's copies into dir and rewrites them into
// one segment there, all within o.CopyTimeout. A copy whose objects are
// missing or differ from its manifest is queued for a check (which marks
// it damaged, so no later run takes it in) and fails the merge.
func (c *Compactor) readAndMerge(ctx context.Context, dir string, run Run, o Pass) (*mergedSegment, error) {
	ctx, cancel := context.WithTimeout(ctx, o.CopyTimeout)
	defer cancel()
	dl := make([]*rsm.DownloadedCopy, 0, len(run.Copies))
	for _, m := range run.Copies {
		d, err := c.d.Bucket.DownloadCopy(ctx, m, dir)
		if err != nil {
			if errors.Is(err, rsm.ErrNotFound) || errors.Is(err, rsm.ErrChecksum) || errors.Is(err, rsm.ErrBadManifest) {
				c.d.Suspect(m)
			}
			return nil, fmt.Errorf("read copy %s: %w", m.ID, err)
		}
		dl = append(dl, d)
	}
	built, err := buildMerged(dir, run, dl, mergeOptions{nowMs: c.d.Now().UnixMilli(), deleteRetentionMs: o.Settings.DeleteRetentionMs,
		atLogStart: run.AtLogStart, indexIntervalBytes: o.IndexIntervalBytes})
	if err != nil {
		return nil, err
	}
	return built, ctx.Err()
}

// failedMerge cleans up a merged copy whose upload failed, as the
// copier's copyOne does for a copy (Deleter.Discard): its objects are
// deleted, its incomplete uploads aborted by exact key, and its row ends
// in DELETE_SEGMENT_FINISHED (or, fenced after its manifest, the row is
// forgotten and the objects are left to the new leader).
func (c *Compactor) failedMerge(ctx context.Context, meta remotelog.SegmentMetadata, err error, o Pass) error {
	if errors.Is(err, c.d.FencedAfterManifest) {
		return c.d.Deleter.Abandon(meta, err)
	}
	c.d.NeedSweep(meta.TopicPartition)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.CopyTimeout)
	defer cancel()
	if derr := c.d.Deleter.Discard(cctx, meta); derr != nil {
		return errors.Join(err, fmt.Errorf("clean up the merged copy (retried on the next passes): %w", derr))
	}
	return err
}

// deleteMerged deletes the copies a finished merged copy replaces, each
// only while the finished rows prove it superseded (remotelog.Supersede
// no longer keeps it, and the merged copy covers its range). Should the
// merged copy not be newer than one of them (the clock went back), it
// replaces nothing: it is deleted instead, and the old copies stay.
func (c *Compactor) deleteMerged(ctx context.Context, tp remotelog.TopicPartition, merged remotelog.SegmentMetadata, run Run) error {
	fin, err := c.d.Store.FinishedSegments(tp)
	if err != nil {
		return err
	}
	live := map[remotelog.SegmentID]bool{}
	for _, r := range remotelog.Supersede(fin) {
		live[r.ID] = true
	}
	for _, old := range run.Copies {
		if live[old.ID] {
			c.d.Log.Error("a merged copy does not replace a copy it merges (its row is not newer: the clock went back?); deleting the merged copy, the old copies stay",
				"partition", tp, "segment", merged.ID, "old_segment", old.ID, "old_event_time_ms", old.EventTimestampMs, "event_time_ms", merged.EventTimestampMs)
			err := c.d.Deleter.Delete(ctx, merged)
			return errors.Join(err, c.d.Deleter.AbortUploads(ctx, tp, map[remotelog.SegmentID]bool{merged.ID: true}))
		}
	}
	// The merged copy is checked in the bucket right before the copies it
	// replaces go (a bucket fault since its upload must not leave neither).
	if ok, err := c.d.Deleter.ProofPresent(ctx, merged); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("merged copy %s has objects missing: the copies it merges stay", merged.ID)
		}
		return err
	}
	deleted := map[remotelog.SegmentID]bool{}
	var errs []error
	for i, old := range run.Copies {
		c.d.Log.Info("deleting a copy merged by remote compaction", "partition", tp, "segment", old.ID, "base_offset", old.StartOffset,
			"end_offset", old.EndOffset, "proof", deleter.SupersededProof(merged))
		if err := c.d.Deleter.Delete(ctx, old); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted[old.ID] = true
		if i == 0 {
			crashpoint.Hit("compact.merged-deleted")
		}
	}
	return errors.Join(append(errs, c.d.Deleter.AbortUploads(ctx, tp, deleted))...)
}

// dropLostMerges deletes each finished merged copy that is damaged (its
// objects went missing after its commit) while every copy it merged
// (compactionOf) is still finished, undamaged and checked present in the
// bucket: readers would otherwise pick the damaged copy for its range
// (it covers more than each old copy, so Supersede keeps both), and it
// holds nothing the old copies do not. The next merge makes it again.
func (c *Compactor) dropLostMerges(ctx context.Context, tp remotelog.TopicPartition) error {
	rows, err := c.d.Store.Segments(tp)
	if err != nil {
		return err
	}
	byID := map[remotelog.SegmentID]remotelog.SegmentMetadata{}
	for _, r := range rows {
		if r.State == remotelog.CopySegmentFinished {
			byID[r.ID] = r
		}
	}
	var errs []error
	for _, m := range rows {
		if m.State != remotelog.CopySegmentFinished || m.CompactionOf == nil || m.Damaged == "" {
			continue
		}
		whole := true
		for _, id := range m.CompactionOf {
			o, ok := byID[id]
			if !ok || o.Damaged != "" {
				whole = false
				break
			}
			if ok, err := c.d.Deleter.ProofPresent(ctx, o); err != nil || !ok {
				errs = append(errs, err)
				whole = false
				break
			}
		}
		if !whole {
			continue
		}
		c.d.Log.Warn("deleting a damaged merged copy of a compacted topic", "partition", tp, "segment", m.ID, "base_offset", m.StartOffset,
			"end_offset", m.EndOffset, "damaged", m.Damaged, "proof", fmt.Sprintf("the %d copies it merged are finished, undamaged and present", len(m.CompactionOf)))
		if err := c.d.Deleter.Delete(ctx, m); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, c.d.Deleter.AbortUploads(ctx, tp, map[remotelog.SegmentID]bool{m.ID: true}))
	}
	return errors.Join(errs...)
}
