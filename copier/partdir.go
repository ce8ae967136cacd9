package copier

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/copier/retention"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// What a pass reads of a partition directory, and the metadata writes it
// leaves out when they would change nothing.

// localSegment is a live .log of a partition directory.
type localSegment struct {
	base int64
	end  int64 // last offset it may hold (next base - 1); -1 for the active one
	size int64 // bytes of the .log
	path string
	// info is the .log as listed: local retention renames the file only
	// while it is still that file (a log cleaner replaces segments by
	// renaming new files into place, never by writing old ones). nil
	// when unknown.
	info os.FileInfo
}

func (s localSegment) active() bool { return s.end < 0 }

// seg is s as package retention sees it.
func (s localSegment) seg() retention.Segment {
	return retention.Segment{Base: s.base, End: s.end, Size: s.size}
}

func (s localSegment) file(suffix string) string {
	return filepath.Join(filepath.Dir(s.path), kafkalog.FileName(s.base, suffix))
}

// listSegments returns the live segments, oldest first.
func listSegments(dir string) ([]localSegment, error) {
	segs, _, err := listDir(dir)
	return segs, err
}

// listDir returns the live segments, oldest first, and whether the
// directory holds any file renamed to .deleted.
func listDir(dir string) ([]localSegment, bool, error) {
	d, err := kafkalog.ListSegmentDir(dir)
	if err != nil {
		return nil, false, err
	}
	segs := make([]localSegment, len(d.Segments))
	for i, f := range d.Segments {
		segs[i] = localSegment{base: f.BaseOffset, end: -1, size: f.Info.Size(), path: f.Path(dir), info: f.Info}
		if i > 0 {
			segs[i-1].end = f.BaseOffset - 1
		}
	}
	return segs, d.Deleted, nil
}

// advanceOffsets is store.AdvanceOffsets without the synced write when
// the recorded offsets are already at or past the given ones (-1 leaves
// one unchanged): offsets never move back, so such a write would store
// the same values. A partition with no offsets recorded is written.
func (c *Copier) advanceOffsets(tp remotelog.TopicPartition, logStart, localLogStart int64) error {
	off, ok, err := c.store.Offsets(tp)
	if err != nil {
		return err
	}
	if ok && off.LogStartOffset >= logStart && off.LocalLogStartOffset >= localLogStart {
		return nil
	}
	_, err = c.store.AdvanceOffsets(tp, logStart, localLogStart)
	return err
}

// purgeDeleted is store.PurgeDeleted, called only when a row is due to
// go (read from the rows the pass keeps), so that a pass where nothing is
// due scans no rows in the store.
func (c *Copier) purgeDeleted(tp remotelog.TopicPartition) error {
	before := c.now().Add(-c.cfg.DeletedRowRetention).UnixMilli()
	rows, err := c.store.Segments(tp)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.State == remotelog.DeleteSegmentFinished && r.EventTimestampMs < before {
			_, err := c.store.PurgeDeleted(tp, before)
			return err
		}
	}
	return nil
}

// plausibleBrokerLSO reports whether the log start offset the broker
// checkpointed for a partition is one Kafka could have written: a log
// start offset never passes the high watermark (delete-records stops
// there), nor, without a high watermark, the log end offset, of which the
// active segment's base offset is a lower bound. The file is keyed by
// topic name only and moves the log start offset past remote copies, so
// a value beyond those bounds (another cluster's file, a hand edit) is
// refused with an error rather than acted on.
func (c *Copier) plausibleBrokerLSO(p *partition) bool {
	bound := int64(-1)
	switch {
	case p.hwKnown:
		bound = p.hw
	case len(p.segs) > 0:
		bound = p.segs[len(p.segs)-1].base
	}
	if bound >= 0 && p.brokerLSO <= bound {
		return true
	}
	if c.once(fmt.Sprintf("lso %s %d", p.tp, p.brokerLSO)) {
		c.log.Error("log-start-offset-checkpoint gives a log start offset past what the log holds; ignored", "partition", p.tp,
			"log_start_offset", p.brokerLSO, "bound", bound, "high_watermark_known", p.hwKnown)
	}
	return false
}
