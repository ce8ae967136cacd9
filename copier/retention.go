package copier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tierd/tierd/copier/retention"
	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/saturate"
)

// segmentTime returns the time local retention judges a segment by: its
// max record timestamp; or its file's modification time when no record has
// a timestamp (as Kafka's LogSegment.largestTimestamp does) or when the max
// timestamp is more than message.timestamp.after.max.ms ahead of the clock
// (a producer's bad clock must not pin the segment forever).
func (c *Copier) segmentTime(tp remotelog.TopicPartition, s localSegment, nowMs int64) (int64, error) {
	ts, err := c.maxTimestamp(s)
	if err != nil {
		return 0, err
	}
	if ts >= 0 && !c.inFuture(tp, s.base, ts, nowMs) {
		return ts, nil
	}
	st, err := os.Stat(s.path)
	if err != nil {
		return 0, err
	}
	return st.ModTime().UnixMilli(), nil
}

// inFuture reports (and warns once) that a timestamp is too far ahead
// (retention.Future).
func (c *Copier) inFuture(tp remotelog.TopicPartition, base, ts, nowMs int64) bool {
	if !retention.Future(ts, nowMs, c.cfg.MessageTimestampAfterMaxMs) {
		return false
	}
	c.warnFuture(tp, base, ts, nowMs)
	return true
}

// warnFuture warns, once per segment, that its max timestamp ts is more
// than message.timestamp.after.max.ms ahead of nowMs.
func (c *Copier) warnFuture(tp remotelog.TopicPartition, base, ts, nowMs int64) {
	if c.once(fmt.Sprintf("future %s %d", tp, base)) {
		c.m.futureTS.Inc()
		c.log.Warn("segment max timestamp is ahead of the clock by more than message.timestamp.after.max.ms; retention uses its file or copy time",
			"partition", tp, "base_offset", base, "max_timestamp", ts, "ahead_ms", ts-nowMs)
	}
}

// localRetention deletes the oldest local segments while local retention
// is breached, as retention.PlanLocal picks them: a segment goes only when
// a finished copy covers it (or it lies wholly below the log start
// offset), when it is not the active segment, and when it is older than
// local.retention.ms or the local log is larger than local.retention.bytes;
// deleting stops at the first segment that may not go. Each copy that is
// the proof is checked in the bucket right before (the first that fails
// ends the deletes there). The new local log start offset is made durable
// before any file is touched; files are renamed to ".deleted" and removed
// FileDeleteDelayMs later, so readers with the files open finish.
func (c *Copier) localRetention(ctx context.Context, p *partition) error {
	fin, err := c.store.FinishedSegments(p.tp)
	if err != nil {
		return err
	}
	fin = undamaged(fin) // a damaged copy is no evidence for a local delete
	offs, _, err := c.store.Offsets(p.tp)
	if err != nil {
		return err
	}
	nowMs := c.now().UnixMilli()
	untilMs, waits := c.retentionWaits(nowMs)
	plan := retention.PlanLocal(retention.LocalInput{
		Segments: segments(p.segs), Copies: fin, LogStartOffset: offs.LogStartOffset,
		Limits: retention.Limits(p.limits), TopicID: p.topicID, Compacts: p.policy.Compact, NowMs: nowMs,
		SegmentTime: func(i int) (int64, error) { return c.segmentTime(p.tp, p.segs[i], nowMs) },
	})
	n := len(plan.Delete)
	for i, d := range plan.Delete {
		if d.Why == retention.BelowLogStart || waits { // while retention waits nothing goes: no check either
			continue
		}
		// The copy is checked in the bucket right before the only local
		// copy goes: a copy damaged behind tierd's back since the last
		// sampled check must not be the proof.
		ok, err := c.localProofPresent(ctx, p, d, p.segs[i])
		if err != nil {
			return err
		}
		if !ok {
			n = i
			break
		}
	}
	if n == len(plan.Delete) && plan.Err != nil {
		return plan.Err
	}
	if n == 0 {
		return nil
	}
	last := n - 1
	if waits {
		var bytes int64
		for _, s := range p.segs[:last+1] {
			bytes += s.size
		}
		c.noteRetentionWait(p, "local", last+1, p.segs[0].base, p.segs[last].end, bytes, untilMs)
		return nil
	}
	_, err = c.withoutBroker(p, func() error { return c.trimLocal(p, last) })
	return err
}

// localProofPresent checks in the bucket the copies that are d's proof for
// deleting local segment s: its exact copy (copyPresent), or the copies
// covering a segment the log cleaner rewrote since (coverPresent and
// coverHolds). Errors: the store's and the bucket's.
func (c *Copier) localProofPresent(ctx context.Context, p *partition, d retention.LocalDelete, s localSegment) (bool, error) {
	if d.Exact {
		return c.audit.copyPresent(ctx, d.Copies, s)
	}
	if ok, err := c.coverPresent(ctx, d.Copies, s); err != nil || !ok {
		return ok, err
	}
	return c.coverHolds(ctx, p, d.Copies, s)
}

// segments returns segs as package retention sees them.
func segments(segs []localSegment) []retention.Segment {
	out := make([]retention.Segment, len(segs))
	for i, s := range segs {
		out[i] = s.seg()
	}
	return out
}

// trimLocal deletes p's local segments up to p.segs[last]: saves the new
// local log start offset, then renames their files to .deleted
// (markDeleted). localRetention calls it with the broker excluded.
func (c *Copier) trimLocal(p *partition, last int) error {
	newLocalStart := p.segs[last+1].base
	if _, err := c.store.AdvanceOffsets(p.tp, -1, newLocalStart); err != nil {
		return err
	}
	crashpoint.Hit("local.offset-saved")
	for i, s := range p.segs[:last+1] {
		if err := markDeleted(s, newLocalStart); errors.Is(err, errCleanerBusy) {
			// The offsets below newLocalStart have finished copies, so
			// the recorded local log start offset stays; the rewritten
			// segment is judged again at the next listing.
			c.log.Info("local segment replaced by the log cleaner while being deleted; it stays until the next pass", "partition", p.tp, "base_offset", s.base, "err", err)
			p.segs = p.segs[i:]
			return nil
		} else if err != nil {
			return err
		}
		crashpoint.Hit("local.renamed")
		c.m.localDeleted.Inc()
		c.log.Info("deleted local segment", "partition", p.tp, "base_offset", s.base, "end_offset", s.end, "bytes", s.size)
	}
	p.segs = p.segs[last+1:]
	return nil
}

// withoutBroker runs fn, which renames or removes files in p's log dir,
// while tierd holds a shared lock on the log dir's .lock (excludeBroker):
// a broker may have started on it since the pass looked (copies take
// minutes), and none can start while fn runs. When a process holds the
// lock, or that cannot be checked, fn does not run: p becomes
// broker-owned for the rest of the pass (and says so in its status).
// Nor does it run, and err says why, when the log dir is no longer
// available (WithLogDirCheck). One goroutine at a time holds a log
// dir's lock. ran reports whether fn ran; err is fn's, or the release's.
func (c *Copier) withoutBroker(p *partition, fn func() error) (ran bool, err error) {
	dir := p.logDir()
	mu := c.dirs.exclusion(dir)
	mu.Lock()
	defer mu.Unlock()
	if err := c.dirs.checkDir(dir); err != nil {
		return false, fmt.Errorf("log dir %s is unavailable: %w", dir, err)
	}
	lock := filepath.Join(dir, BrokerLockFile)
	e, pid, err := excludeBroker(lock)
	switch {
	case errors.Is(err, errBrokerHolds):
		p.ownedWhy = fmt.Sprintf("a running process (%s) holds a lock on %s, as a Kafka broker does while it runs: tierd deletes no local file in it", pidText(pid), lock)
		p.owner = fmt.Sprintf("a running broker holds %s (%s)", BrokerLockFile, pidText(pid))
	case err != nil:
		p.ownedWhy = fmt.Sprintf("whether a broker holds %s cannot be checked (%v): tierd deletes no local file in it", lock, err)
		p.owner = "not known: the broker's lock cannot be checked"
	default:
		defer func() { err = errors.Join(err, e.release()) }()
		return true, fn()
	}
	p.brokerOwned = true
	if c.once("lockedmidpass " + p.dir + p.ownedWhy) {
		c.log.Warn("a broker holds the log dir's lock: local retention renames and deletes nothing", "partition", p.tp, "dir", dir, "why", p.ownedWhy)
	}
	return false, nil
}

// markDeleted renames a segment's files to "<name>.deleted" and stamps
// them with the current time, which removeDeleted reads. Producer
// snapshots below the new local log start offset go too.
//
// The .log goes first, and only while it is still the file that was
// listed and checked (same file, same size): a broker's log cleaner may
// have swapped in a rewritten segment under the same name since, holding
// offsets no copy covers (two segments merged into one). Such a file is
// renamed back at once, nothing else is touched, and errCleanerBusy is
// returned. A .log already gone (the broker deleted or is swapping it)
// leaves the segment's other files alone.
func markDeleted(s localSegment, newLocalStart int64) error {
	dir := filepath.Dir(s.path)
	for _, suffix := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix, kafkalog.TxnIndexSuffix, kafkalog.SnapshotSuffix} {
		p := s.file(suffix)
		if suffix == kafkalog.SnapshotSuffix && s.base >= newLocalStart {
			continue
		}
		if err := os.Rename(p, p+kafkalog.DeletedSuffix); err != nil {
			if os.IsNotExist(err) {
				if suffix == kafkalog.LogSuffix {
					return kafkalog.SyncDir(dir)
				}
				continue
			}
			return err
		}
		if suffix == kafkalog.LogSuffix && s.info != nil {
			after, err := os.Stat(p + kafkalog.DeletedSuffix)
			if err != nil || !os.SameFile(s.info, after) || after.Size() != s.size {
				if rerr := os.Rename(p+kafkalog.DeletedSuffix, p); rerr != nil {
					return errors.Join(fmt.Errorf("%w: %s was replaced after it was listed, and renaming it back failed", errCleanerBusy, p), rerr, err)
				}
				return errors.Join(fmt.Errorf("%w: %s was replaced after it was listed; left in place", errCleanerBusy, p), err)
			}
		}
		now := time.Now()
		if err := os.Chtimes(p+kafkalog.DeletedSuffix, now, now); err != nil {
			return err
		}
	}
	return kafkalog.SyncDir(dir)
}

// removeDeleted removes ".deleted" files older than FileDeleteDelayMs.
func (c *Copier) removeDeleted(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	delay := c.cfg.FileDeleteDelay()
	if delay == saturate.Forever {
		return nil // file.delete.delay.ms of ~292 years or more: kept
	}
	cutoff := time.Now().Add(-delay)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), kafkalog.DeletedSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil || info.ModTime().After(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// remoteRetention deletes remote copies, oldest first, while they breach
// retention, as retention.PlanRemote picks them: wholly below the log
// start offset, a max timestamp older than retention.ms, or the log (local
// size + remote copies below the local log start offset, each offset
// counted once) larger than retention.bytes by at least the copy's size
// (Kafka's RemoteLogManager rule: the log is never cut below
// retention.bytes).
// The log start offset moves past a copy (durably) before its objects are
// deleted: past a group of up to deleteBatch copies at once, which then
// go through the delete protocol together (deleter.Group: two synced
// writes per group). A group with a copy whose objects failed to go ends
// the pass; that copy stays in DELETE_SEGMENT_STARTED, below the log
// start offset, and the next pass finishes it. Superseded copies
// (retention.Superseded) are deleted first (deleter.DeleteSuperseded),
// each once the copy that supersedes it is checked present in the bucket.
func (c *Copier) remoteRetention(ctx context.Context, p *partition) (err error) {
	deleted := map[remotelog.SegmentID]bool{} // once for all: their incomplete uploads
	defer func() { err = errors.Join(err, c.deletes().AbortUploads(ctx, p.tp, deleted)) }()
	rows, err := c.store.Segments(p.tp)
	if err != nil {
		return err
	}
	fin, err := c.store.FinishedSegments(p.tp)
	if err != nil {
		return err
	}
	gone, err := c.deletes().DeleteSuperseded(ctx, p.tp, retention.Superseded(rows))
	errs := []error{err}
	for id := range gone {
		deleted[id] = true
	}
	offs, _, err := c.store.Offsets(p.tp)
	if err != nil {
		return err
	}
	nowMs := c.now().UnixMilli()
	plan := retention.PlanRemote(retention.RemoteInput{
		Copies: fin, Segments: segments(p.segs), LogStartOffset: offs.LogStartOffset,
		Limits: retention.Limits(p.limits), Policy: retention.Policy(p.policy),
		NowMs: nowMs, TimestampAfterMaxMs: c.cfg.MessageTimestampAfterMaxMs,
	})
	for _, r := range plan.Future {
		c.warnFuture(r.TopicPartition, r.StartOffset, r.MaxTimestampMs, nowMs)
	}
	if untilMs, waits := c.retentionWaits(nowMs); waits && len(plan.Delete) > 0 {
		var bytes int64
		for _, d := range plan.Delete {
			bytes += d.Copy.SizeInBytes
		}
		c.noteRetentionWait(p, "remote", len(plan.Delete), plan.Delete[0].Copy.StartOffset, plan.Delete[len(plan.Delete)-1].Copy.EndOffset, bytes, untilMs)
		return errors.Join(errs...)
	}
	// Up to deleteBatch copies at a time go through the delete protocol
	// together.
	for i := 0; i < len(plan.Delete); i += deleteBatch {
		j := min(i+deleteBatch, len(plan.Delete))
		group := make([]remotelog.SegmentMetadata, 0, j-i)
		for _, d := range plan.Delete[i:j] {
			group = append(group, d.Copy)
		}
		// The log start offset moves past the whole group, durably,
		// before any of its objects is deleted.
		if offs, err = c.store.AdvanceOffsets(p.tp, plan.Delete[j-1].LogStart, -1); err != nil {
			return errors.Join(append(errs, err)...)
		}
		crashpoint.Hit("remote.offset-saved")
		ids, err := c.deletes().Group(ctx, p.tp, group, false)
		gone := make(map[remotelog.SegmentID]bool, len(ids))
		for _, id := range ids {
			gone[id], deleted[id] = true, true
		}
		for _, r := range group {
			if gone[r.ID] {
				c.log.Info("deleted remote segment", "partition", p.tp, "base_offset", r.StartOffset, "end_offset", r.EndOffset, "log_start_offset", offs.LogStartOffset)
			}
		}
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	return errors.Join(errs...)
}
