package copier

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/copier/remotecompact"
	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
)

// Record-level proofs for compacted topics (compacted.go): when offsets,
// sizes and topic ids cannot tell a segment the broker's cleaner rewrote
// from one whose records are not tiered, the records themselves are
// compared with the copies'.

// coverHolds is the proof coverPresent cannot give without topic ids:
// when the directory or a covering copy has no topic id, nothing tells a
// segment the cleaner rewrote from another incarnation's segment of the
// same offsets (a topic deleted and re-created), so the covering copies
// are read (rsm.DownloadCopy, checked against their manifests) and every
// record of local segment s must be among them at its offset with the same
// timestamp, key, value and headers (cleaning only removes records). It
// reports false, logged once, when one is not. With topic ids on both
// sides (rewritable compared them) it reads nothing. Errors: the bucket's,
// rsm's, and kafkalog.ErrCorrupt for a batch that breaks the log's rules.
func (c *Copier) coverHolds(ctx context.Context, p *partition, cover []remotelog.SegmentMetadata, s localSegment) (bool, error) {
	known := p.topicID != ""
	for _, r := range cover {
		known = known && r.TopicID != ""
	}
	if known {
		return true, nil
	}
	if c.warned(fmt.Sprintf("notcovered %s %d %d", p.tp, s.base, s.size)) {
		return false, nil // found so before: not read again each pass
	}
	dir := filepath.Join(p.dir, StagingDir, fmt.Sprintf("cover-%020d", s.base))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	defer func() {
		os.RemoveAll(dir)
		os.Remove(filepath.Dir(dir)) // the staging root, when empty
	}()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CopyTimeout)
	defer cancel()
	digest := func(r batch.Record) [sha256.Size]byte {
		h := sha256.New()
		fmt.Fprintf(h, "%d|%d|%x|%t|%d|%x|%d", r.Timestamp, len(r.Key), r.Key, r.Value == nil, len(r.Value), r.Value, len(r.Headers))
		for _, hd := range r.Headers {
			fmt.Fprintf(h, "|%d|%s|%t|%x", len(hd.Key), hd.Key, hd.Value == nil, hd.Value)
		}
		return [sha256.Size]byte(h.Sum(nil))
	}
	held := map[int64][sha256.Size]byte{}
	for _, r := range cover {
		d, err := c.rs.DownloadCopy(ctx, r, dir)
		if err != nil {
			return false, fmt.Errorf("read copy %s to compare with segment %d: %w", r.ID, s.base, err)
		}
		err = remotecompact.EachEntry(d.Log, r, func(raw []byte) error {
			recs, err := batch.Records(raw, codec.Kafka)
			for _, rec := range recs {
				held[rec.Offset] = digest(rec)
			}
			return err
		})
		os.Remove(d.Log)
		if err != nil {
			return false, err
		}
	}
	missing := int64(-1)
	err := remotecompact.EachEntry(s.path, remotelog.SegmentMetadata{StartOffset: s.base, EndOffset: s.end}, func(raw []byte) error {
		recs, err := batch.Records(raw, codec.Kafka)
		for _, rec := range recs {
			if d, ok := held[rec.Offset]; (!ok || d != digest(rec)) && missing < 0 {
				missing = rec.Offset
			}
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("read segment %d: %w", s.base, err)
	}
	if missing >= 0 {
		if c.once(fmt.Sprintf("notcovered %s %d %d", p.tp, s.base, s.size)) {
			c.m.mismatch.Inc()
			c.log.Error("local segment of a compacted topic holds a record its copies do not (without topic ids: was the topic deleted and re-created?); it is kept locally",
				"partition", p.tp, "base_offset", s.base, "end_offset", s.end, "offset", missing)
		}
		return false, nil
	}
	return true, nil
}

// mayCopyMerged reports whether segment s of a compacted topic, which
// starts at or below the highest tiered offset (the cleaner merged copied
// segments into it), may be copied from offset from (s.base, or the
// first offset of its tail: tailcopy.go): not when it lost a tombstone or
// marker held by copies within [from, s.end], which its copy would
// supersede (dropsDeletes); it then waits, logged once. A tail copy
// starts after the copies holding the segment's start, so it supersedes
// none of them, and usually none at all.
func (c *Copier) mayCopyMerged(ctx context.Context, p *partition, fin []remotelog.SegmentMetadata, s localSegment, from int64) (bool, error) {
	key := fmt.Sprintf("dropsdeletes %s %d %d", p.tp, s.base, s.size)
	if c.warned(key) {
		return false, nil // found so before (and the status says so): not read again each pass
	}
	at, lost, err := c.dropsDeletes(ctx, p, fin, s, from)
	if err != nil {
		return false, fmt.Errorf("compare segment %d with the copies it covers: %w", s.base, err)
	}
	if !lost {
		return true, nil
	}
	if c.once(key) {
		c.log.Error("local segment of a compacted topic merges copied segments but no longer holds a tombstone or transaction marker their copies hold; "+
			"copying it would supersede those copies and bring older values back, so it is not copied", "partition", p.tp, "base_offset", s.base,
			"end_offset", s.end, "offset", at)
	}
	c.wait(p.tp, remotelog.WaitNotCleaned, fmt.Sprintf("cleanup.policy=%s: segment %d merges copied segments, and the tombstone or marker at offset %d their copies hold "+
		"is no longer in it; copying it would supersede them and bring older values back: it waits (see the log)", p.policy, s.base, at))
	return false, nil
}

// warned reports whether once(key) was called before, without setting it.
func (c *Copier) warned(key string) bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.warns[key]
}

// dropsDeletes reports whether copying local segment s of a compacted
// topic would lose a tombstone or a transaction marker: the broker's log
// cleaner merged copied segments into s (Kafka groups cleaned and dirty
// segments into one), and past their delete horizon it removed tombstones
// and markers that the copies s covers still hold. The copy of s would
// supersede those copies, and the remote tier would read an older value
// of the key from a copy before them again (the local cleaner never sees
// remote copies). So the copies within [from, s.end] (the range copied)
// are read and each of their tombstones and control records must still be
// in s at its offset. Errors: the bucket's, rsm's, and kafkalog.ErrCorrupt.
func (c *Copier) dropsDeletes(ctx context.Context, p *partition, fin []remotelog.SegmentMetadata, s localSegment, from int64) (int64, bool, error) {
	var inside []remotelog.SegmentMetadata
	for _, r := range fin {
		if r.StartOffset >= from && r.EndOffset <= s.end && r.Damaged == "" { // a damaged copy is read by no one
			inside = append(inside, r)
		}
	}
	if len(inside) == 0 {
		return 0, false, nil
	}
	local := map[int64]bool{}
	err := remotecompact.EachEntry(s.path, remotelog.SegmentMetadata{StartOffset: s.base, EndOffset: s.end}, func(raw []byte) error {
		recs, err := batch.Records(raw, codec.Kafka)
		for _, rec := range recs {
			local[rec.Offset] = true
		}
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("read segment %d: %w", s.base, err)
	}
	dir := filepath.Join(p.dir, StagingDir, fmt.Sprintf("deletes-%020d", s.base))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, false, err
	}
	defer func() {
		os.RemoveAll(dir)
		os.Remove(filepath.Dir(dir)) // the staging root, when empty
	}()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CopyTimeout)
	defer cancel()
	lost := int64(-1)
	for _, r := range inside {
		d, err := c.rs.DownloadCopy(ctx, r, dir)
		if err != nil {
			return 0, false, fmt.Errorf("read copy %s to compare with segment %d: %w", r.ID, s.base, err)
		}
		err = remotecompact.EachEntry(d.Log, r, func(raw []byte) error {
			h, err := batch.ParseHeader(raw, 0)
			if err != nil {
				return err
			}
			recs, err := batch.Records(raw, codec.Kafka)
			for _, rec := range recs {
				if (h.Control || rec.Value == nil) && !local[rec.Offset] && lost < 0 {
					lost = rec.Offset
				}
			}
			return err
		})
		os.Remove(d.Log)
		if err != nil {
			return 0, false, err
		}
	}
	return lost, lost >= 0, nil
}
