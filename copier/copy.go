package copier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// cleanupUnfinished finishes what a previous pass or process left: a row
// still in COPY_SEGMENT_STARTED is an abandoned copy (passes do not
// overlap, so no copy is in flight), a row in DELETE_SEGMENT_STARTED an
// interrupted delete. Both have their objects deleted (missing objects are
// fine) and end in DELETE_SEGMENT_FINISHED.
func (c *Copier) cleanupUnfinished(ctx context.Context, tp remotelog.TopicPartition) error {
	rows, err := c.store.Segments(tp)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rows {
		if r.State != remotelog.CopySegmentStarted && r.State != remotelog.DeleteSegmentStarted {
			continue
		}
		if r.State == remotelog.CopySegmentStarted {
			c.log.Info("cleaning up an unfinished copy", "partition", tp, "segment", r.ID, "base_offset", r.StartOffset)
		}
		if err := c.deleteRemote(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteRemote runs the delete protocol for one row: DELETE_SEGMENT_STARTED
// (synced), delete the objects (manifest first), DELETE_SEGMENT_FINISHED.
func (c *Copier) deleteRemote(ctx context.Context, r remotelog.SegmentMetadata) error {
	if r.State != remotelog.DeleteSegmentStarted {
		var err error
		if r, err = c.store.UpdateState(r.TopicPartition, r.StartOffset, r.ID, remotelog.DeleteSegmentStarted); err != nil {
			return err
		}
	}
	if err := c.rs.DeleteSegment(ctx, r); err != nil {
		return fmt.Errorf("delete segment %s: %w", r.ID, err)
	}
	if _, err := c.store.UpdateState(r.TopicPartition, r.StartOffset, r.ID, remotelog.DeleteSegmentFinished); err != nil {
		return err
	}
	c.m.remoteDeleted.Inc()
	return nil
}

// covered reports whether a finished row covers the whole local segment.
func covered(fin []remotelog.SegmentMetadata, s localSegment) bool {
	for _, r := range fin {
		if r.StartOffset <= s.base && r.EndOffset >= s.end {
			return true
		}
	}
	return false
}

// copyRolled copies, oldest first, every rolled segment without a finished
// copy that is committed (below the high watermark when the log dir has a
// replication-offset-checkpoint) and not below the log start offset. It
// stops at the first failure so the tiered offsets stay contiguous.
func (c *Copier) copyRolled(ctx context.Context, p *partition) (int, error) {
	fin, err := c.store.FinishedSegments(p.tp)
	if err != nil {
		return 0, err
	}
	offs, _, err := c.store.Offsets(p.tp)
	if err != nil {
		return 0, err
	}
	highest := offs.HighestTieredOffset
	copied := 0
	for _, s := range p.segs {
		if s.active() || (p.hwKnown && s.end >= p.hw) {
			break
		}
		if s.end < offs.LogStartOffset || covered(fin, s) || s.end <= highest {
			continue
		}
		if highest >= 0 && s.base > highest+1 && highest+1 >= offs.LogStartOffset {
			c.reportGap(p.tp, highest+1, s.base-1)
		}
		if err := ctx.Err(); err != nil {
			return copied, err
		}
		if err := c.copyOne(ctx, p, s); err != nil {
			return copied, fmt.Errorf("copy segment %d: %w", s.base, err)
		}
		copied++
		highest = s.end
	}
	return copied, nil
}

// reportGap logs and counts offsets that vanished locally before they were
// copied (a broker's own retention ran ahead of tierd).
func (c *Copier) reportGap(tp remotelog.TopicPartition, from, to int64) {
	key := fmt.Sprintf("gap %s %d %d", tp, from, to)
	if c.warns[key] {
		return
	}
	c.warns[key] = true
	c.m.gaps.Inc()
	c.log.Error("offsets were deleted locally before tierd copied them", "partition", tp, "from", from, "to", to)
}

func (c *Copier) copyOne(ctx context.Context, p *partition, s localSegment) error {
	maxTS, err := c.maxTimestamp(s)
	if err != nil {
		return err
	}
	epochs, err := epoch.ReadFile(epoch.Path(p.dir))
	if err != nil {
		return err
	}
	files := rsm.SegmentFiles{
		Log: s.path, OffsetIndex: s.file(kafkalog.IndexSuffix), TimeIndex: s.file(kafkalog.TimeIndexSuffix),
		LeaderEpochs: epoch.InRange(epochs, s.base, s.end),
	}
	if exists(s.file(kafkalog.TxnIndexSuffix)) {
		files.TxnIndex = s.file(kafkalog.TxnIndexSuffix)
	}
	if snap := filepath.Join(p.dir, kafkalog.FileName(s.end+1, kafkalog.SnapshotSuffix)); exists(snap) {
		files.ProducerSnapshot = snap
	}
	meta := remotelog.SegmentMetadata{
		TopicPartition: p.tp, ID: remotelog.NewSegmentID(), StartOffset: s.base, EndOffset: s.end,
		MaxTimestampMs: maxTS, SizeInBytes: s.size, State: remotelog.CopySegmentStarted, BrokerID: c.cfg.BrokerID,
		SegmentLeaderEpochs: files.LeaderEpochs, TxnIndexPresent: files.TxnIndex != "", ProducerSnapshotPresent: files.ProducerSnapshot != "",
	}
	if err := c.store.AddSegment(meta); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CopyTimeout)
	defer cancel()
	if _, err := c.rs.CopySegment(cctx, meta, files); err != nil {
		c.m.copyFailures.Inc()
		if derr := c.deleteRemote(context.WithoutCancel(ctx), meta); derr != nil {
			err = errors.Join(err, fmt.Errorf("clean up failed copy: %w", derr))
		}
		return err
	}
	if _, err := c.store.UpdateState(p.tp, meta.StartOffset, meta.ID, remotelog.CopySegmentFinished); err != nil {
		return err
	}
	c.m.copied.Inc()
	c.m.copiedBytes.Add(float64(s.size))
	c.log.Info("copied segment", "partition", p.tp, "base_offset", s.base, "end_offset", s.end, "bytes", s.size, "segment", meta.ID)
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// maxTimestamp returns a rolled segment's largest batch timestamp: the last
// time index entry (a broker adds one for the max when it rolls), or a scan
// of the batch headers when the index has none. -1 when no batch has a
// timestamp. Results are cached by file and size.
func (c *Copier) maxTimestamp(s localSegment) (int64, error) {
	key := fmt.Sprintf("%s:%d", s.path, s.size)
	if ts, ok := c.times[key]; ok {
		return ts, nil
	}
	ts := batch.NoTimestamp
	if raw, err := os.ReadFile(s.file(kafkalog.TimeIndexSuffix)); err == nil {
		if es, err := index.ParseTimeIndex(raw, s.base); err == nil && len(es) > 0 {
			ts = es[len(es)-1].Timestamp
		}
	}
	if ts < 0 {
		f, err := os.Open(s.path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		sc := batch.NewScanner(f, s.size, batch.ScanOptions{})
		for sc.Next() {
			ts = max(ts, sc.Batch().MaxTimestamp)
		}
		if err := sc.Err(); err != nil {
			return 0, kafkalog.WithFile(err, s.path)
		}
	}
	c.times[key] = ts
	return ts, nil
}
