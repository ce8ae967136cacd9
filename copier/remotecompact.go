package copier

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/copier/deleter"
	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// Remote compaction. A compacted topic's copies each hold the
// cleaned contents of one local segment, but a key updated in a later
// segment keeps its older versions in the earlier copies for as long as
// they live: the remote tier would grow with dead versions. So, once a
// pass has applied retention to a partition of a topic whose
// cleanup.policy contains compact, it merges one run of adjacent copies
// (planCompaction says which) into one copy, re-compacted by Kafka's
// cleaner rules (buildMerged), committed with the copy protocol, and then
// deletes the copies it replaces:
//
//  1. read each copy's objects by key, checked against its manifest
//     (rsm.DownloadCopy), and rewrite them in the partition's staging
//     folder;
//  2. COPY_SEGMENT_STARTED for a new segment id covering the run's whole
//     range [first start offset, last end offset] (crash point
//     compact.started);
//  3. upload its objects, the manifest last, naming the merged copies
//     (compactionOf) (compact.uploaded);
//  4. COPY_SEGMENT_FINISHED (compact.finished): the row is remotelog.Newer
//     than every copy it merges (finished later) and covers each one's
//     range, so remotelog.Supersede, and with it every reader, sees the
//     merged copy from this one write on, and the merged copies no more;
//  5. delete each merged copy with DELETE_SEGMENT_STARTED/FINISHED
//     (compact.merged-deleted after the first), its proof: superseded by
//     the new copy, FINISHED, covering its range.
//
// A crash before 4 leaves the old copies readable and a STARTED row,
// which the next pass's deleter.CleanupUnfinished deletes with its objects; a
// crash after 4 leaves the merged copy readable, and the next pass's
// remote retention deletes the superseded copies on the same proof.
// Only the partitions this tierd owns are merged (the pass runs only
// for them), the lease is renewed before the work starts and before the
// commit, and with a Kafka cluster the copy is made under the leader
// epoch fence as any copy is.

// compactMetrics counts remote compaction.
type compactMetrics struct {
	merges, merged, reclaimed, failures prometheus.Counter
	recordsDropped                      prometheus.Counter
}

func newCompactMetrics(reg prometheus.Registerer) *compactMetrics {
	f := promauto.With(reg)
	c := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Name: "tierd_copier_remote_compaction_" + name, Help: help})
	}
	return &compactMetrics{
		merges:         c("merges_total", "Remote compactions committed: runs of adjacent copies of a compacted topic merged into one copy."),
		merged:         c("copies_merged_total", "Copies replaced by remote compactions."),
		reclaimed:      c("reclaimed_bytes_total", "Bytes of .log the remote tier holds less after remote compactions (the merged copies' bytes less the new copy's)."),
		failures:       c("failures_total", "Remote compactions that failed (their new copy, if any, was cleaned up; the old copies stay)."),
		recordsDropped: c("records_dropped_total", "Records remote compactions left out (older versions of a key, tombstones past their horizon, aborted transactions)."),
	}
}

// remoteCompact merges at most one run of a partition's copies, when the
// topic is compacted and remote compaction is on.
func (c *Copier) remoteCompact(ctx context.Context, p *partition) error {
	if err := c.dropLostMerges(ctx, p); err != nil {
		return fmt.Errorf("%w: %w", errRemoteCompaction, err)
	}
	if !c.cfg.RemoteCompaction.Enable || !p.policy.Compact {
		return nil
	}
	fin, err := c.store.FinishedSegments(p.tp)
	if err != nil {
		return err
	}
	offs, _, err := c.store.Offsets(p.tp)
	if err != nil {
		return err
	}
	localStart := int64(math.MaxInt64)
	if len(p.segs) > 0 {
		localStart = p.segs[0].base
	}
	s := c.compactionFor(p.tp.Topic)
	run, ok := planCompaction(fin, localStart, offs.LogStartOffset, c.now().UnixMilli(), s)
	if !ok {
		return nil
	}
	committed, err := c.mergeRun(ctx, p, run, s)
	if err != nil && !committed {
		c.rc.failures.Inc()
	}
	if err != nil {
		return fmt.Errorf("%w of %s: %w", errRemoteCompaction, run, err)
	}
	return nil
}

// mergeRun merges one run (see the file comment for the steps) and
// reports whether the merged copy was committed (finished), which an
// error in deleting the copies it replaces does not undo.
func (c *Copier) mergeRun(ctx context.Context, p *partition, run compactionRun, s compactionSettings) (bool, error) {
	if own, err := c.renew(ctx, p); err != nil || !own {
		return false, err
	}
	id := remotelog.NewSegmentID()
	dir := filepath.Join(p.dir, StagingDir, fmt.Sprintf("compact-%020d-%s", run.start(), id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	defer func() {
		os.RemoveAll(dir)
		os.Remove(filepath.Dir(dir)) // the staging root, when empty
	}()
	built, err := c.readAndMerge(ctx, dir, run, s)
	if err != nil {
		return false, err
	}
	// The merge may have taken a while: the lease must still be ours.
	if own, err := c.renew(ctx, p); err != nil || !own {
		return false, err
	}
	maxTS := built.maxTimestamp
	if maxTS < 0 { // nothing kept has a timestamp: the copies' own
		for _, m := range run.copies {
			maxTS = max(maxTS, m.MaxTimestampMs)
		}
	}
	files := built.files
	files.Throttle = c.throttle
	meta := remotelog.SegmentMetadata{
		TopicPartition: p.tp, TopicID: run.copies[0].TopicID, ID: id, StartOffset: run.start(), EndOffset: run.end(),
		MaxTimestampMs: maxTS, SizeInBytes: built.size, State: remotelog.CopySegmentStarted, BrokerID: c.cfg.BrokerID, InstanceID: c.cfg.InstanceID,
		SegmentLeaderEpochs: files.LeaderEpochs, TxnIndexPresent: files.TxnIndex != "", ProducerSnapshotPresent: files.ProducerSnapshot != "",
		Compacted: true, CompactionOf: run.ids(),
	}
	if p.leaderEpoch >= 0 {
		le := p.leaderEpoch
		meta.CopyLeaderEpoch = &le
		files.BeforeManifest = func(ctx context.Context) error { return c.rs.CheckFence(ctx, p.tp, p.topicID, le) }
	}
	if err := c.store.AddSegment(meta); err != nil {
		return false, err
	}
	crashpoint.Hit("compact.started")
	if err := c.upload(ctx, meta, files); err != nil {
		return false, c.failedMerge(ctx, p.tp, meta, err)
	}
	crashpoint.Hit("compact.uploaded")
	if meta, err = c.store.UpdateState(p.tp, meta.StartOffset, meta.ID, remotelog.CopySegmentFinished); err != nil {
		return false, err
	}
	crashpoint.Hit("compact.finished")
	c.rc.merges.Inc()
	c.rc.merged.Add(float64(len(run.copies)))
	c.rc.reclaimed.Add(float64(max(run.bytes-built.size, 0)))
	c.rc.recordsDropped.Add(float64(built.recordsRead - built.recordsKept))
	c.log.Info("merged remote copies of a compacted topic into one", "partition", p.tp, "segment", meta.ID, "start_offset", meta.StartOffset,
		"end_offset", meta.EndOffset, "copies", len(run.copies), "bytes_before", run.bytes, "bytes", built.size,
		"records_before", built.recordsRead, "records", built.recordsKept, "at_log_start", run.atLogStart)
	return true, c.deleteMerged(ctx, p.tp, meta, run)
}

// readAndMerge downloads the run's copies into dir and rewrites them into
// one segment there, all within copy_timeout. A copy whose objects are
// missing or differ from its manifest is queued for a check (which marks
// it damaged, so no later run takes it in) and fails the merge.
func (c *Copier) readAndMerge(ctx context.Context, dir string, run compactionRun, s compactionSettings) (*mergedSegment, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CopyTimeout)
	defer cancel()
	dl := make([]*rsm.DownloadedCopy, 0, len(run.copies))
	for _, m := range run.copies {
		d, err := c.rs.DownloadCopy(ctx, m, dir)
		if err != nil {
			if errors.Is(err, rsm.ErrNotFound) || errors.Is(err, rsm.ErrChecksum) || errors.Is(err, rsm.ErrBadManifest) {
				c.audit.suspect(m)
			}
			return nil, fmt.Errorf("read copy %s: %w", m.ID, err)
		}
		dl = append(dl, d)
	}
	built, err := buildMerged(dir, run, dl, mergeOptions{nowMs: c.now().UnixMilli(), deleteRetentionMs: s.deleteRetentionMs,
		atLogStart: run.atLogStart, indexIntervalBytes: c.cfg.IndexIntervalBytes})
	if err != nil {
		return nil, err
	}
	return built, ctx.Err()
}

// failedMerge cleans up a merged copy whose upload failed, as copyOne
// does for a copy (deleter.Discard): its objects are deleted, its incomplete
// uploads aborted by exact key, and its row ends in
// DELETE_SEGMENT_FINISHED (or, fenced after its manifest, the row is
// forgotten and the objects are left to the new leader).
func (c *Copier) failedMerge(ctx context.Context, tp remotelog.TopicPartition, meta remotelog.SegmentMetadata, err error) error {
	if errors.Is(err, errFencedAfterManifest) {
		return c.deletes().Abandon(meta, err)
	}
	c.needSweep(tp)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CopyTimeout)
	defer cancel()
	if derr := c.deletes().Discard(cctx, meta); derr != nil {
		return errors.Join(err, fmt.Errorf("clean up the merged copy (retried on the next passes): %w", derr))
	}
	return err
}

// deleteMerged deletes the copies a finished merged copy replaces, each
// only while the finished rows prove it superseded (remotelog.Supersede
// no longer keeps it, and the merged copy covers its range). Should the
// merged copy not be newer than one of them (the clock went back), it
// replaces nothing: it is deleted instead, and the old copies stay.
func (c *Copier) deleteMerged(ctx context.Context, tp remotelog.TopicPartition, merged remotelog.SegmentMetadata, run compactionRun) error {
	fin, err := c.store.FinishedSegments(tp)
	if err != nil {
		return err
	}
	live := map[remotelog.SegmentID]bool{}
	for _, r := range remotelog.Supersede(fin) {
		live[r.ID] = true
	}
	for _, old := range run.copies {
		if live[old.ID] {
			c.log.Error("a merged copy does not replace a copy it merges (its row is not newer: the clock went back?); deleting the merged copy, the old copies stay",
				"partition", tp, "segment", merged.ID, "old_segment", old.ID, "old_event_time_ms", old.EventTimestampMs, "event_time_ms", merged.EventTimestampMs)
			err := c.deletes().Delete(ctx, merged)
			return errors.Join(err, c.deletes().AbortUploads(ctx, tp, map[remotelog.SegmentID]bool{merged.ID: true}))
		}
	}
	// The merged copy is checked in the bucket right before the copies it
	// replaces go (a bucket fault since its upload must not leave neither).
	if ok, err := c.deletes().ProofPresent(ctx, merged); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("merged copy %s has objects missing: the copies it merges stay", merged.ID)
		}
		return err
	}
	deleted := map[remotelog.SegmentID]bool{}
	var errs []error
	for i, old := range run.copies {
		c.log.Info("deleting a copy merged by remote compaction", "partition", tp, "segment", old.ID, "base_offset", old.StartOffset,
			"end_offset", old.EndOffset, "proof", deleter.SupersededProof(merged))
		if err := c.deletes().Delete(ctx, old); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted[old.ID] = true
		if i == 0 {
			crashpoint.Hit("compact.merged-deleted")
		}
	}
	return errors.Join(append(errs, c.deletes().AbortUploads(ctx, tp, deleted))...)
}

// dropLostMerges deletes each finished merged copy that is damaged (its
// objects went missing after its commit) while every copy it merged
// (compactionOf) is still finished, undamaged and checked present in the
// bucket: readers would otherwise pick the damaged copy for its range
// (it covers more than each old copy, so Supersede keeps both), and it
// holds nothing the old copies do not. The next merge makes it again.
func (c *Copier) dropLostMerges(ctx context.Context, p *partition) error {
	rows, err := c.store.Segments(p.tp)
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
			if ok, err := c.deletes().ProofPresent(ctx, o); err != nil || !ok {
				errs = append(errs, err)
				whole = false
				break
			}
		}
		if !whole {
			continue
		}
		c.log.Warn("deleting a damaged merged copy of a compacted topic", "partition", p.tp, "segment", m.ID, "base_offset", m.StartOffset,
			"end_offset", m.EndOffset, "damaged", m.Damaged, "proof", fmt.Sprintf("the %d copies it merged are finished, undamaged and present", len(m.CompactionOf)))
		if err := c.deletes().Delete(ctx, m); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, c.deletes().AbortUploads(ctx, p.tp, map[remotelog.SegmentID]bool{m.ID: true}))
	}
	return errors.Join(errs...)
}
