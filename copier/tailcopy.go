package copier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
)

// Tail copies. Kafka's log cleaner groups adjacent segments
// into one (LogCleaner's groupSegmentsBySize): a cleaned segment A whose
// copy is finished, holding offsets up to h, and the next segment B, not
// yet copied, become one local segment named by A's base offset. A copy
// of that whole segment would cover A's copy and, being newer, supersede
// it (remotelog.Supersede); past delete.retention.ms the cleaner has also
// dropped A's tombstones, so superseding A's copy would bring back older
// values of their keys still held by earlier copies. The copier therefore
// copies only the segment's tail: the batches whose base offset is past
// h. The cleaner keeps each retained batch's base and last offset, so A's
// batches end at or before h and B's start after it; a batch that
// straddles h (base offset <= h < last offset) cannot be split, and the
// segment waits. The tail copy holds offsets [h+1, end]: it starts right
// after the copies holding the segment's start, so those copies and the
// tail copy hold every offset of the segment (cleanedCover), and local
// retention may delete the segment once they are checked.

// errStraddle: a batch of a partly tiered segment holds offsets on both
// sides of the last tiered offset; the segment waits.
var errStraddle = errors.New("copier: a batch straddles the last tiered offset")

// errEmptyTail: a partly tiered segment holds no batch after the last
// tiered offset; the segment waits.
var errEmptyTail = errors.New("copier: no batch after the last tiered offset")

// tieredThrough returns the last offset of the finished, undamaged
// copies among fin that hold local segment s's offsets one after the
// other from its base offset (each one a copy the cleaner may have
// rewritten the segment after: rewritable), or s.base-1 when no such copy
// holds s.base.
func (p *partition) tieredThrough(fin []remotelog.SegmentMetadata, s localSegment) int64 {
	next := s.base
	for next <= s.end {
		best := -1
		for i, r := range fin {
			if r.Damaged == "" && r.Contains(next) && p.rewritable(r) && (best < 0 || r.EndOffset > fin[best].EndOffset) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		next = fin[best].EndOffset + 1
	}
	return next - 1
}

// damagedTail reports whether the tail copy of local segment s (offsets
// [h+1, s.end], h the last offset tieredThrough finds) is marked damaged
// and no undamaged copy holds those offsets: the tail is copied again,
// and the new copy supersedes the damaged one.
func (p *partition) damagedTail(fin []remotelog.SegmentMetadata, s localSegment) bool {
	cand := false // cheap first: a damaged copy ending where s ends, past its start
	for _, r := range fin {
		cand = cand || (r.Damaged != "" && r.StartOffset > s.base && r.EndOffset == s.end && p.rewritable(r))
	}
	if !cand {
		return false
	}
	h := p.tieredThrough(fin, s)
	if h < s.base || h >= s.end {
		return false
	}
	for _, r := range fin {
		if r.Damaged != "" && r.StartOffset == h+1 && r.EndOffset == s.end && p.rewritable(r) {
			return true
		}
	}
	return false
}

// cutTail turns the staged files of local segment s into those of its
// tail from offset from (the last tiered offset + 1): a new .log holding
// the staged batches whose base offset is at least from, byte for byte;
// no .index or .timeindex (the caller uploads ones rebuilt from the new
// .log); the .txnindex entries whose aborted transaction ends at or after
// from (Kafka files an aborted transaction in the segment of its abort
// marker); the producer snapshot as staged. The staged links are removed,
// never the local files. Errors: errStraddle or errEmptyTail (the segment
// waits), errCorruptSegment when the batches before the tail cannot be
// read, and the filesystem's.
func (st *staged) cutTail(s localSegment, from int64) error {
	f, err := os.Open(st.log)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	sc := batch.NewScanner(f, info.Size(), batch.ScanOptions{BufferSize: 1 << 20})
	pos := int64(-1)
	for pos < 0 && sc.Next() {
		b := sc.Batch()
		switch {
		case b.BaseOffset >= from:
			pos = b.Position
		case b.LastOffset >= from:
			return fmt.Errorf("%w: the batch at byte %d holds offsets %d to %d, and offsets up to %d are tiered", errStraddle, b.Position, b.BaseOffset, b.LastOffset, from-1)
		}
	}
	if pos < 0 {
		if err := sc.Err(); err != nil {
			if nz, zerr := batch.FirstNonZero(f, sc.ValidEnd(), info.Size()); !errors.Is(err, kafkalog.ErrCorrupt) || zerr != nil || nz >= 0 {
				return fmt.Errorf("%w: %w", errCorruptSegment, kafkalog.WithFile(err, s.path))
			}
		}
		return fmt.Errorf("%w: offsets up to %d are tiered and the segment's batches end there", errEmptyTail, from-1)
	}
	tail := filepath.Join(st.dir, kafkalog.FileName(from, kafkalog.LogSuffix))
	out, err := os.Create(tail)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.NewSectionReader(f, pos, info.Size()-pos)); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	for _, l := range []string{st.log, st.offsetIdx, st.timeIdx} {
		if l != "" {
			if err := os.Remove(l); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	st.log, st.offsetIdx, st.timeIdx = tail, "", ""
	return st.cutTxnIndex(from)
}

// cutTxnIndex keeps the staged .txnindex entries of transactions aborted
// at or after offset from, in a new file ("" when none remain).
func (st *staged) cutTxnIndex(from int64) error {
	if st.txnIdx == "" {
		return nil
	}
	raw, err := os.ReadFile(st.txnIdx)
	if err != nil {
		return err
	}
	all, err := index.ParseTxnIndex(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", errCorruptSegment, kafkalog.WithFile(err, st.txnIdx))
	}
	var kept []byte
	for _, t := range all {
		if t.LastOffset >= from {
			kept = index.AppendAbortedTxn(kept, t)
		}
	}
	if err := os.Remove(st.txnIdx); err != nil {
		return err
	}
	st.txnIdx = ""
	if len(kept) == 0 {
		return nil
	}
	st.txnIdx = filepath.Join(st.dir, kafkalog.FileName(from, kafkalog.TxnIndexSuffix))
	return os.WriteFile(st.txnIdx, kept, 0o644)
}

// copyStart returns the first offset of rolled segment s to copy
// (highest: the highest tiered offset) and whether s may be copied now.
// When the cleaner merged copied segments of a compacted topic into s
// (it starts at or below highest), that is the offset after the copies
// holding its start (its tail), or s.base when no copy holds its start;
// either way s waits (false) when its copy would supersede copies holding
// a tombstone or marker s lost (mayCopyMerged).
func (c *Copier) copyStart(ctx context.Context, p *partition, fin []remotelog.SegmentMetadata, s localSegment, highest int64) (int64, bool, error) {
	if !p.policy.Compact || s.base > highest {
		return s.base, true, nil
	}
	from := s.base
	if h := p.tieredThrough(fin, s); h >= s.base {
		from = h + 1
	}
	ok, err := c.mayCopyMerged(ctx, p, fin, s, from)
	return from, ok, err
}

// waitTail logs once and puts in the status why a partly tiered segment
// waits (errStraddle, errEmptyTail).
func (c *Copier) waitTail(p *partition, s localSegment, from int64, err error) {
	if c.once(fmt.Sprintf("tailwait %s %d %d", p.tp, s.base, s.size)) {
		c.log.Warn("segment merges copied segments with new ones and its tail cannot be cut at the last tiered offset; it waits",
			"partition", p.tp, "base_offset", s.base, "end_offset", s.end, "tiered_through", from-1, "err", err)
	}
	c.wait(p.tp, remotelog.WaitNotCleaned, fmt.Sprintf("cleanup.policy=%s: segment %d (offsets %d to %d) merges copied segments with new ones, and only its batches after the last tiered offset %d are copied; "+
		"it cannot be cut there: %v; it waits until the broker's cleaner rewrites it (merging it with the next segment gives it batches to copy)", p.policy, s.base, s.base, s.end, from-1, err))
}
