package remotecompact

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/compact"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/kafkalog/snapshot"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// mergedSegment is a run's copies rewritten into one segment's files, in
// a staging folder, ready for rsm.CopySegment.
type mergedSegment struct {
	files        rsm.SegmentFiles // paths; LeaderEpochs set
	size         int64            // bytes of the .log
	maxTimestamp int64            // ms; -1 when no batch has one
	recordsRead  int
	recordsKept  int
}

// mergeOptions are the inputs of one merge besides the copies.
type mergeOptions struct {
	nowMs              int64
	deleteRetentionMs  int64
	atLogStart         bool // tombstones and markers past their horizon may go
	indexIntervalBytes int64
}

// buildMerged rewrites the downloaded copies of a run, oldest first, into
// one segment at run.Start() in dir, by the rules of Kafka's log cleaner
// (package compact) with the key map built over the whole run:
//
//   - .log: each copy's entries, CRC-checked and checked against the
//     rules no CRC covers (batch.Checker: offsets increasing within the
//     copy's range), filtered in offset order; so a record stays unless a
//     later record of the run has its key, offsets are never reordered,
//     and base offsets and last offset deltas stay. Tombstones and
//     transaction markers follow delete.retention.ms (the first merge sets
//     their delete horizon, a later one past it drops them), but only in a
//     run at the log start: a later run keeps them (compact's
//     KeepDeletes), since an earlier copy may hold older records of their
//     keys or the batches a marker ends.
//   - .index and .timeindex: rebuilt by Kafka's rule (index.Builder, every
//     index.interval.bytes, and the max timestamp entry at the end).
//   - .txnindex: the aborted transactions still referenced: those whose
//     batches the run still holds (compact's AbortedKept) in a run at the
//     log start, every one of the copies' entries in a later run; none:
//     no file.
//   - producer snapshot: the last copy's, unchanged (the producer state
//     at the run's end offset + 1); its active producers' last batches
//     stay, empty when nothing else in them does.
//   - leader epochs: the copies' entries in order, an epoch listed once.
//
// Errors: kafkalog.ErrCorrupt (wrapped, naming the copy) for a copy whose
// bytes break the rules; compact.ErrDecode; disk errors.
func buildMerged(dir string, run Run, dl []*rsm.DownloadedCopy, o mergeOptions) (*mergedSegment, error) {
	if len(dl) != len(run.Copies) || len(dl) == 0 {
		return nil, fmt.Errorf("%w: %d copies downloaded for a run of %d", ErrCompaction, len(dl), len(run.Copies))
	}
	base, end := run.Start(), run.End()
	var aborted []index.AbortedTxn
	for i, d := range dl {
		if d.TxnIndex == nil {
			continue
		}
		es, err := index.ParseTxnIndex(d.TxnIndex)
		if err != nil {
			return nil, fmt.Errorf("transaction index of copy %s: %w", run.Copies[i].ID, err)
		}
		aborted = append(aborted, es...)
	}
	last := dl[len(dl)-1]
	var active map[int64]compact.Producer
	if last.ProducerSnapshot != nil {
		es, err := snapshot.Parse(last.ProducerSnapshot)
		if err != nil {
			return nil, fmt.Errorf("producer snapshot of copy %s: %w", run.Copies[len(dl)-1].ID, err)
		}
		active = map[int64]compact.Producer{}
		for _, e := range es {
			if e.LastOffset < 0 || (e.LastOffset >= base && e.LastOffset <= end) {
				active[e.ProducerID] = compact.Producer{LastDataOffset: e.LastOffset, Epoch: e.ProducerEpoch}
			}
		}
	}
	m := compact.NewOffsetMap(base, aborted, codec.Kafka)
	for i, d := range dl {
		if err := EachEntry(d.Log, run.Copies[i], m.Add); err != nil {
			return nil, err
		}
		m.Cover(run.Copies[i].EndOffset + 1)
	}
	f := compact.NewFilter(m, compact.Options{NowMs: o.nowMs, DeleteRetentionMs: o.deleteRetentionMs, Aborted: aborted,
		ActiveProducers: active, UpperBound: end + 1, KeepDeletes: !o.atLogStart, Compressor: codec.Kafka, Decompressor: codec.Kafka})
	out := &mergedSegment{maxTimestamp: batch.NoTimestamp}
	files := &out.files
	files.Log = filepath.Join(dir, kafkalog.FileName(base, kafkalog.LogSuffix))
	lf, err := os.Create(files.Log)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	w := bufio.NewWriterSize(lf, 1<<20)
	b := index.NewBuilder(base, o.indexIntervalBytes)
	rules := batch.NewChecker(base, end) // the output keeps the rules: a self-check that nothing is reordered
	var buf []byte
	for i, d := range dl {
		err := EachEntry(d.Log, run.Copies[i], func(raw []byte) error {
			var res compact.Result
			var err error
			buf, res, err = f.Batch(buf[:0], raw)
			if err != nil {
				return err
			}
			out.recordsRead += max(res.RecordsRead, 0)
			out.recordsKept += max(res.RecordsKept, 0)
			if len(buf) == 0 {
				return nil
			}
			h, err := batch.ParseHeader(buf, out.size)
			if err != nil {
				return err
			}
			if err := rules.Check(h); err != nil {
				return fmt.Errorf("%w: merged output breaks the log's rules: %w", ErrCompaction, err)
			}
			b.Add(h.LastOffset, h.MaxTimestamp, out.size, int32(len(buf)))
			if _, err := w.Write(buf); err != nil {
				return err
			}
			out.size += int64(len(buf))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	if err := lf.Close(); err != nil {
		return nil, err
	}
	b.Seal()
	out.maxTimestamp = b.MaxTimestamp
	if err := writeMergedFiles(dir, base, b, run, dl, f, o, files); err != nil {
		return nil, err
	}
	return out, nil
}

// writeMergedFiles writes the indexes, the transaction index and the
// producer snapshot of a merged segment, and sets their paths and the
// leader epochs in files.
func writeMergedFiles(dir string, base int64, b *index.Builder, run Run, dl []*rsm.DownloadedCopy, f *compact.Filter,
	o mergeOptions, files *rsm.SegmentFiles) error {
	offs, times, err := b.Encode(base)
	if err != nil {
		return err
	}
	write := func(suffix string, data []byte) (string, error) {
		p := filepath.Join(dir, kafkalog.FileName(base, suffix))
		return p, os.WriteFile(p, data, 0o644)
	}
	if files.OffsetIndex, err = write(kafkalog.IndexSuffix, offs); err != nil {
		return err
	}
	if files.TimeIndex, err = write(kafkalog.TimeIndexSuffix, times); err != nil {
		return err
	}
	var txns []byte
	if o.atLogStart {
		for _, t := range f.AbortedKept() {
			txns = index.AppendAbortedTxn(txns, t)
		}
	} else {
		for _, d := range dl {
			txns = append(txns, d.TxnIndex...) // each parsed whole above
		}
	}
	if len(txns) > 0 {
		if files.TxnIndex, err = write(kafkalog.TxnIndexSuffix, txns); err != nil {
			return err
		}
	}
	if snap := dl[len(dl)-1].ProducerSnapshot; snap != nil {
		if files.ProducerSnapshot, err = write(kafkalog.SnapshotSuffix, snap); err != nil {
			return err
		}
	}
	files.LeaderEpochs = mergeEpochs(run.Copies)
	return nil
}

// mergeEpochs joins the leader epochs of adjacent copies, oldest first:
// each epoch once, at the first offset a copy records for it.
func mergeEpochs(copies []remotelog.SegmentMetadata) []remotelog.EpochEntry {
	var out []remotelog.EpochEntry
	for _, m := range copies {
		for _, e := range m.SegmentLeaderEpochs {
			if n := len(out); n > 0 && out[n-1].Epoch >= e.Epoch {
				continue
			}
			out = append(out, e)
		}
	}
	return out
}

// EachEntry calls fn with every entry of a .log at path in order (a
// downloaded copy's, or a local segment's with meta giving its offsets),
// after checking its CRC and the rules no CRC covers within meta's offset
// range. The raw bytes are valid only during the call. Errors:
// kafkalog.ErrCorrupt for a bad CRC or a broken rule, fn's own, disk
// errors; all but fn's other errors are named "copy " and meta's id.
func EachEntry(path string, meta remotelog.SegmentMetadata, fn func(raw []byte) error) error {
	lf, err := os.Open(path)
	if err != nil {
		return err
	}
	defer lf.Close()
	info, err := lf.Stat()
	if err != nil {
		return err
	}
	sc := batch.NewScanner(lf, info.Size(), batch.ScanOptions{VerifyCRC: true, BufferSize: 1 << 20})
	rules := batch.NewChecker(meta.StartOffset, meta.EndOffset)
	for sc.Next() {
		b := sc.Batch()
		if !sc.CRCValid() {
			return kafkalog.WithFile(&kafkalog.CorruptionError{Position: b.Position, Reason: "CRC mismatch in the batch"}, "copy "+meta.ID.String())
		}
		if err := rules.Check(b); err != nil {
			return kafkalog.WithFile(err, "copy "+meta.ID.String())
		}
		raw, err := sc.Entry()
		if err != nil {
			return kafkalog.WithFile(err, "copy "+meta.ID.String())
		}
		if err := fn(raw); err != nil {
			if errors.Is(err, kafkalog.ErrCorrupt) || errors.Is(err, compact.ErrDecode) {
				return kafkalog.WithFile(err, "copy "+meta.ID.String())
			}
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return kafkalog.WithFile(err, "copy "+meta.ID.String())
	}
	return nil
}
