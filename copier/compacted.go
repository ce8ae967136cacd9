package copier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/copier/retention"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/remotelog"
)

// Tiering compacted topics. A broker's log cleaner rewrites
// the closed segments of a topic whose cleanup.policy includes compact,
// again and again, keeping the latest record of each key at its original
// offset. tierd therefore copies such a segment only once the cleaner
// has passed it: its whole range lies below the partition's entry in the
// log dir's cleaner-offset-checkpoint (Kafka's LogCleanerManager writes
// there the first dirty offset: every offset below it is cleaned). A
// later rewrite of the local segment (a new cleaning pass, segments
// merged into one) leaves the copy valid: cleaning only removes records,
// so the copy holds every record the local segment holds, and at least
// the latest value of every key in its range, which is what compaction
// promises. Such a rewrite is noted, never reported as a mismatch, never
// marks the copy damaged, and the copies covering the segment's offsets
// let local retention delete it.

// cleanerEntry is what the log dir's cleaner-offset-checkpoint says of
// one partition.
type cleanerEntry struct {
	file       bool  // the log dir has the file
	err        error // the file could not be read or parsed
	has        bool  // the partition has an entry
	firstDirty int64 // the entry: every offset below it is cleaned
}

// readCleanerCheckpoint reads a log dir's cleaner-offset-checkpoint: nil
// and no error when the file is missing.
func readCleanerCheckpoint(logDir string) (map[kafkalog.TopicPartition]int64, error) {
	return checkpoint.ReadFile(filepath.Join(logDir, checkpoint.CleanerOffsetFile))
}

// cleanerOf returns the entry of tp in a parsed checkpoint (m nil: no
// file; err: unreadable).
func cleanerOf(m map[kafkalog.TopicPartition]int64, err error, tp remotelog.TopicPartition) cleanerEntry {
	e := cleanerEntry{file: m != nil, err: err}
	e.firstDirty, e.has = m[tp]
	return e
}

// activeBase is the base offset of the partition's active segment, -1
// when it has no segment.
func (p *partition) activeBase() int64 {
	if len(p.segs) == 0 {
		return -1
	}
	return p.segs[len(p.segs)-1].base
}

// cleanedThrough reports whether the broker's log cleaner has passed all
// of rolled segment s: the partition's cleaner checkpoint is past its
// last offset. An entry past the active segment's base offset is one
// Kafka's cleaner never writes (it never cleans the active segment; a
// truncated log leaves such a stale entry, which Kafka itself resets):
// nothing counts as cleaned then.
func (p *partition) cleanedThrough(s localSegment) bool {
	e := p.cleaner
	return e.err == nil && e.has && s.end < e.firstDirty && e.firstDirty <= p.activeBase()
}

// notCleanedDetail says why segment s of a compacted topic waits; n and
// bytes are the rolled segments waiting.
func (p *partition) notCleanedDetail(s localSegment, n int, bytes int64) string {
	file := filepath.Join(p.logDir(), checkpoint.CleanerOffsetFile)
	e := p.cleaner
	head := fmt.Sprintf("cleanup.policy=%s: rolled segments are copied only once the broker's log cleaner has passed them; %d (%d bytes) wait: ", p.policy, n, bytes)
	switch {
	case e.err != nil:
		return head + fmt.Sprintf("%s cannot be read (%v)", file, e.err)
	case !e.file:
		return head + fmt.Sprintf("the log dir has no %s: the cleaner has written none there yet (is log.cleaner.enable off?), so nothing counts as cleaned", file)
	case !e.has:
		return head + fmt.Sprintf("the partition has no entry in %s: the cleaner has not cleaned it yet (a topic just switched to compact waits for its first cleaning)", file)
	case e.firstDirty > p.activeBase():
		return head + fmt.Sprintf("the entry in %s, %d, is past the active segment's base offset %d, which the cleaner never passes (a truncated log's stale entry, which Kafka resets): nothing counts as cleaned",
			file, e.firstDirty, p.activeBase())
	}
	return head + fmt.Sprintf("the first dirty offset in %s is %d, and the next segment (base offset %d) ends at %d", file, e.firstDirty, s.base, s.end)
}

// rewritable reports whether a finished copy may differ in size from the
// local segment of its offsets because the log cleaner rewrote that
// segment (retention.Rewritable, for the incarnation and policy of p).
func (p *partition) rewritable(r remotelog.SegmentMetadata) bool {
	return retention.Rewritable(r, p.topicID, p.policy.Compact)
}

// cleanedCover returns finished copies among fin (oldest first) that
// together hold every offset of local segment s, each one a copy the
// cleaner may have rewritten the local segment after (rewritable); nil
// when no such copies cover s (retention.CleanedCover).
func (p *partition) cleanedCover(fin []remotelog.SegmentMetadata, s localSegment) []remotelog.SegmentMetadata {
	return retention.CleanedCover(fin, s.seg(), p.topicID, p.policy.Compact)
}

// damagedCompacted is damagedExactly for a segment the cleaner may have
// rewritten after its copy: no undamaged copies cover it, and a damaged
// copy of exactly its offsets exists, so it is copied again.
func (p *partition) damagedCompacted(fin []remotelog.SegmentMetadata, s localSegment) bool {
	if p.cleanedCover(undamaged(fin), s) != nil {
		return false
	}
	for _, r := range fin {
		if r.Damaged != "" && r.StartOffset == s.base && r.EndOffset == s.end && p.rewritable(r) {
			return true
		}
	}
	return false
}

// coverPresent is copyPresent for the copies cleanedCover returned: each
// is checked in the bucket right before the local segment goes, and
// marked damaged when an object is missing.
func (c *Copier) coverPresent(ctx context.Context, cover []remotelog.SegmentMetadata, s localSegment) (bool, error) {
	for _, r := range cover {
		if err := c.audit.checkCopy(ctx, r); err != nil {
			return false, fmt.Errorf("check the copy at %d of segment %d before deleting it locally: %w", r.StartOffset, s.base, err)
		}
		cur, err := c.store.Segment(r.TopicPartition, r.StartOffset, r.ID)
		if err != nil {
			return false, err
		}
		if cur.State != remotelog.CopySegmentFinished || cur.Damaged != "" {
			return false, nil
		}
	}
	return len(cover) > 0, nil
}

// noteRecleaned logs, once per file size, a local segment of a compacted
// topic that differs from the copies of its offsets: the cleaner
// rewrote it after they were made. Not an error; the copies stay.
func (c *Copier) noteRecleaned(tp remotelog.TopicPartition, s localSegment) {
	if c.once(fmt.Sprintf("recleaned %s %d %d", tp, s.base, s.size)) {
		c.log.Info("local segment of a compacted topic was cleaned again after its copy: the copy stays (it holds at least the latest value of every key in its range)",
			"partition", tp, "base_offset", s.base, "end_offset", s.end, "bytes", s.size)
	}
}

// errCleanerBusy: the broker's log cleaner replaced segments of the
// partition while a copy was being staged; the next pass tries again.
var errCleanerBusy = errors.New("copier: the log cleaner is replacing the partition's segments")

// stageSettled stages segment s of a compacted topic as stage does, and
// then checks that the broker's log cleaner did not swap segments under
// it: Kafka replaces cleaned segments by renaming ".cleaned" files to
// ".swap", deleting the old segments (several may be merged into one)
// and renaming the ".swap" files live. A listing taken mid-swap can
// show a segment's base offset with a range another segment holds, and
// a staged file can be the old one. So the live .log must be the very
// file listed before staging (same file, size and modification time),
// the directory must hold no ".cleaned" or ".swap" file, and the next
// live segment must still start at s.end+1. Otherwise errCleanerBusy:
// the copy waits for the next pass. Topics that are not compacted are
// staged as they are.
func stageSettled(p *partition, s localSegment, id remotelog.SegmentID) (*staged, error) {
	if !p.policy.Compact {
		return stage(p, s, id)
	}
	before, err := os.Stat(s.path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%w: %s is gone", errCleanerBusy, s.path)
		}
		return nil, err
	}
	st, err := stage(p, s, id)
	if err != nil {
		return st, err
	}
	after, err := os.Stat(s.path)
	switch {
	case err != nil && os.IsNotExist(err):
		return st, fmt.Errorf("%w: %s went while it was staged", errCleanerBusy, s.path)
	case err != nil:
		return st, err
	case before.Size() != s.size || !os.SameFile(before, after) || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()):
		return st, fmt.Errorf("%w: %s was replaced after it was listed", errCleanerBusy, s.path)
	}
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return st, err
	}
	next := int64(-1)
	for _, e := range ents {
		f, ok := kafkalog.ParseFileName(e.Name())
		if !ok {
			continue
		}
		if f.Pending == kafkalog.CleanedSuffix || f.Pending == kafkalog.SwapSuffix {
			return st, fmt.Errorf("%w: %s is there", errCleanerBusy, e.Name())
		}
		if f.Live && f.Suffix == kafkalog.LogSuffix && f.BaseOffset > s.base && (next < 0 || f.BaseOffset < next) {
			next = f.BaseOffset
		}
	}
	if next != s.end+1 {
		return st, fmt.Errorf("%w: the segment after base offset %d now starts at %d, not %d", errCleanerBusy, s.base, next, s.end+1)
	}
	return st, nil
}
