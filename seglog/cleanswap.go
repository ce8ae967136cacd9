package seglog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/compact"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// Crash points of a cleaning, in order (internal/crashpoint names): after
// the .cleaned files are written and fsynced; after they are renamed to
// .swap; after the old segments are renamed to .deleted; after the .swap
// files are renamed to live names; before the checkpoint is written.
const (
	CrashCleaned    = "seglog.clean.cleaned"
	CrashSwap       = "seglog.clean.swap"
	CrashDeleted    = "seglog.clean.deleted"
	CrashLive       = "seglog.clean.live"
	CrashCheckpoint = "seglog.clean.checkpoint"
)

// segmentSuffixes are the files of a segment, the .log last: renames go in
// this order so that a .log with a suffix means its indexes have it too.
var segmentSuffixes = []string{kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix, kafkalog.TxnIndexSuffix, kafkalog.LogSuffix}

// writeCleaned filters the group's segments into "<base>.log.cleaned" and
// its indexes, fsynced, and returns the new segment (its files still named
// .cleaned). keptTxns counts the filter's kept aborted transactions already
// written to an earlier group's .txnindex.
func (l *Log) writeCleaned(g []*segment, f *compact.Filter, keptTxns *int, st *CleanStats) (_ *segment, err error) {
	base, end := g[0].base, g[len(g)-1].nextOffset
	// ns is not the named result: the error returns set that to nil,
	// and the cleanup below still needs ns.
	ns := &segment{dir: l.dir, base: base, nextOffset: end, idx: index.NewBuilder(base, int64(l.cfg.IndexIntervalBytes)),
		firstBatchTimestamp: batch.NoTimestamp, createdMs: l.now().UnixMilli()}
	cleaned := func(suffix string) string { return ns.path(suffix) + kafkalog.CleanedSuffix }
	defer func() {
		if err != nil {
			if ns.log != nil {
				ns.log.Close()
			}
			for _, sfx := range segmentSuffixes {
				os.Remove(cleaned(sfx))
			}
		}
	}()
	if ns.log, err = os.OpenFile(cleaned(kafkalog.LogSuffix), os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644); err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(ns.log, 1<<20)
	// The last batch of the group stays, empty if need be, so that the
	// cleaned segment ends at the group's end and recovery of an
	// interrupted swap knows which old segments it replaces.
	f.SetUpperBound(end)
	var out []byte
	for _, s := range g {
		st.BytesRead += s.size
		err := eachEntry(s, func(raw []byte) error {
			var res compact.Result
			var err error
			out, res, err = f.Batch(out[:0], raw)
			if err != nil {
				return err
			}
			st.RecordsRead += max(res.RecordsRead, 0)
			st.RecordsKept += max(res.RecordsKept, 0)
			if len(out) == 0 {
				return nil
			}
			b, err := batch.ParseHeader(out, ns.size)
			if err != nil {
				return err
			}
			if h, ok := compact.DeleteHorizon(b); ok && h > f.NowMs() {
				st.LatestDeleteHorizonMs = max(st.LatestDeleteHorizonMs, h)
			}
			if _, err := w.Write(out); err != nil {
				return err
			}
			if ns.size == 0 {
				ns.firstBatchTimestamp = b.MaxTimestamp
			}
			ns.idx.Add(b.LastOffset, b.MaxTimestamp, ns.size, b.Size)
			ns.size += int64(len(out))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	ns.idx.Seal()
	if err := w.Flush(); err != nil {
		return nil, err
	}
	st.BytesWritten += ns.size
	offs, times, err := ns.idx.Encode(base)
	if err != nil {
		return nil, err
	}
	var txns []byte
	kept := f.AbortedKept()
	for ; *keptTxns < len(kept) && kept[*keptTxns].LastOffset < end; *keptTxns++ {
		txns = appendTxnEntry(txns, kept[*keptTxns])
	}
	files := map[string][]byte{kafkalog.IndexSuffix: offs, kafkalog.TimeIndexSuffix: times}
	if len(txns) > 0 {
		files[kafkalog.TxnIndexSuffix] = txns
	}
	for sfx, data := range files {
		if err := writeSynced(cleaned(sfx), data); err != nil {
			return nil, err
		}
	}
	if err := ns.log.Sync(); err != nil {
		return nil, err
	}
	return ns, kafkalog.SyncDir(l.dir)
}

func appendTxnEntry(dst []byte, e index.AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	for _, v := range []int64{e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

// writeSynced creates path with data and fsyncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// swapIn replaces the group's segments by ns under the log's lock, by
// Kafka's protocol (LocalLog.replaceSegments): .cleaned -> .swap, old
// segments -> .deleted, .swap -> live, then the .deleted files go. When the
// group is no longer in the log (tiering removed a segment, or the log
// closed) nothing changes and the .cleaned files are removed.
func (l *Log) swapIn(g []*segment, ns *segment) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := l.groupIndex(g)
	if at >= 0 && groupGone(g) {
		// Tiering's local retention renamed a segment of the group away
		// after Clean planned (Refresh only runs at the start): swapping
		// now would fail past the commit point and a reopen would bring
		// the removed offsets back from the .swap.
		at = -1
	}
	if at < 0 || l.closed {
		ns.log.Close()
		for _, sfx := range segmentSuffixes {
			os.Remove(ns.path(sfx) + kafkalog.CleanedSuffix)
		}
		if l.closed {
			return ErrClosed
		}
		return fmt.Errorf("%w: segment %d", ErrCleanAbandoned, g[0].base)
	}
	crashpoint.Hit(CrashCleaned)
	if err := renameSegment(ns, kafkalog.CleanedSuffix, kafkalog.SwapSuffix); err != nil {
		return fmt.Errorf("swap in cleaned segment %d: %w", ns.base, err)
	}
	crashpoint.Hit(CrashSwap)
	// From here on the .swap files are the commit point: a failure leaves
	// them for Open to finish the swap, and Clean refuses to run again
	// until then. Reads keep working on the old segments' open files.
	for _, s := range g {
		if err := renameSegment(s, "", kafkalog.DeletedSuffix); err != nil {
			l.swapPending = fmt.Errorf("retire segment %d: %w (reopen the log to finish the swap)", s.base, err)
			return l.swapPending
		}
	}
	crashpoint.Hit(CrashDeleted)
	if err := renameSegment(ns, kafkalog.SwapSuffix, ""); err != nil {
		l.swapPending = fmt.Errorf("make cleaned segment %d live: %w (reopen the log to finish the swap)", ns.base, err)
		return l.swapPending
	}
	crashpoint.Hit(CrashLive)
	segs := append(append(append([]*segment(nil), l.segs[:at]...), ns), l.segs[at+len(g):]...)
	l.segs = segs
	var errs []error
	for _, s := range g {
		errs = append(errs, s.close())
		for _, sfx := range segmentSuffixes {
			if err := os.Remove(s.path(sfx) + kafkalog.DeletedSuffix); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil && l.logger != nil {
		// The swap is done; a leftover .deleted file is removed by Open.
		l.logger.Warn("removing replaced segment files", "dir", l.dir, "err", err)
	}
	return nil
}

// groupGone reports whether the .log of any segment of g left the
// directory (tiering's local retention renames it to .deleted first).
func groupGone(g []*segment) bool {
	for _, s := range g {
		if s.gone() {
			return true
		}
	}
	return false
}

// groupIndex returns where g sits in l.segs, contiguous and below the
// active segment, or -1.
func (l *Log) groupIndex(g []*segment) int {
	for i, s := range l.segs {
		if s != g[0] {
			continue
		}
		if i+len(g) >= len(l.segs) {
			return -1
		}
		for k := range g {
			if l.segs[i+k] != g[k] {
				return -1
			}
		}
		return i
	}
	return -1
}

// renameSegment renames every existing file of s from suffix from to
// suffix to (each appended to the live name), .log last, then fsyncs the
// directory.
func renameSegment(s *segment, from, to string) error {
	for _, sfx := range segmentSuffixes {
		err := os.Rename(s.path(sfx)+from, s.path(sfx)+to)
		if err != nil && !(os.IsNotExist(err) && sfx != kafkalog.LogSuffix) {
			return err
		}
	}
	return kafkalog.SyncDir(s.dir)
}
