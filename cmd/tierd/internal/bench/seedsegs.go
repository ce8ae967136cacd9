package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sync/errgroup"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/seglog"
)

// This file seeds scale_segments' copies directly, without the copier:
// at 10-55 copies a second the copier needs hours for 100,000 copies,
// almost all of it spent on per-copy work (a local segment written and
// rolled, staged, inspected, uploaded, then dropped by local retention)
// that the case does not measure. The seed makes the same objects and
// rows the copier makes, through the same calls:
//
//   - the objects with rsm.Manager.CopySegment, from local files whose
//     bytes are those of a segment the embedded log wrote (one batch of 16
//     records), so keys, the manifest and every object's bytes are what
//     the copier uploads for that segment;
//   - the rows with rlmm.Store.AddSegment (COPY_SEGMENT_STARTED) and
//     UpdateState (COPY_SEGMENT_FINISHED), with the offsets, size, max
//     timestamp and leader epochs the copier records, after the
//     partition's EnsurePartition at the log start offset the checkpoint
//     file gives, as the copier adopts a partition.
//
// Two things differ from a copier pass, neither visible to a reader: the
// store is opened with file syncs skipped while seeding (a crash would
// lose the seed, not a measure; it is closed, which writes everything,
// and opened again with syncs before anything is measured), and up to
// seedUploads copies are uploaded at a time (the copier copies one
// partition's segments one after another). The copier's check after an
// upload that every object is present (rsm VerifyPresent) is left out:
// it only reads. TestSeedMatchesCopier asserts that readers cannot tell
// a seeded copy from a copier-made one.

// seedUploads is how many copies the seed uploads at a time.
const seedUploads = 16

// segTemplate is one rolled one-batch segment as the embedded log wrote
// it at base offset 0: its files' bytes and what the copier reads from
// them.
type segTemplate struct {
	log, offsetIdx, timeIdx []byte
	maxTimestamp            int64 // ms
}

// at returns the template's .log bytes at base offset base: a batch's
// base offset is its first 8 bytes, outside its CRC (which covers the
// attributes to the end), so the batch stays valid.
func (t segTemplate) at(base int64) []byte {
	b := bytes.Clone(t.log)
	binary.BigEndian.PutUint64(b, uint64(base))
	return b
}

// segsTemplate writes one segment of one batch of 16 records stamped ts
// (ms) with the embedded log, as writeSegsLog writes each of the case's
// segments, and returns its bytes and the partition's leader epoch
// checkpoint.
func segsTemplate(dir string, ts int64) (segTemplate, []byte, error) {
	var t segTemplate
	l, err := seglog.Open(dir, seglog.DefaultConfig())
	if err != nil {
		return t, nil, err
	}
	if _, err = l.AppendBatch(batch.CodecNone, segsRecords(ts)...); err == nil {
		err = l.Roll()
	}
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return t, nil, err
	}
	first := filepath.Join(dir, kafkalog.FileName(0, ""))
	read := func(suffix string) []byte {
		if err != nil {
			return nil
		}
		var b []byte
		b, err = os.ReadFile(first + suffix)
		return b
	}
	t.log, t.offsetIdx, t.timeIdx = read(kafkalog.LogSuffix), read(kafkalog.IndexSuffix), read(kafkalog.TimeIndexSuffix)
	if err != nil {
		return t, nil, err
	}
	epochs, err := os.ReadFile(epoch.Path(dir))
	if err != nil {
		return t, nil, err
	}
	sc := batch.NewScanner(bytes.NewReader(t.log), int64(len(t.log)), batch.ScanOptions{})
	n := 0
	for sc.Next() {
		n++
		b := sc.Batch()
		if b.BaseOffset != 0 || b.LastOffset != 15 || b.End() != int64(len(t.log)) {
			return t, nil, fmt.Errorf("seed template: batch of offsets %d-%d, bytes %d-%d of %d; want one batch of offsets 0-15", b.BaseOffset, b.LastOffset, b.Position, b.End(), len(t.log))
		}
		t.maxTimestamp = b.MaxTimestamp
	}
	if err := sc.Err(); err != nil || n != 1 {
		return t, nil, fmt.Errorf("seed template: %d batches: %v", n, err)
	}
	return t, epochs, nil
}

// segsRecords are the 16 records of one of the case's segments.
func segsRecords(ts int64) []seglog.Record {
	value := make([]byte, scaleRecordBytes)
	recs := make([]seglog.Record, 16)
	for j := range recs {
		recs[j] = seglog.Record{Value: value, Timestamp: ts}
	}
	return recs
}

// noSyncFS is vfs.Default with file syncs skipped: for the seed only.
type noSyncFS struct{ vfs.FS }

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                         { return nil }
func (noSyncFile) SyncData() error                     { return nil }
func (noSyncFile) SyncTo(int64) (bool, error)          { return true, nil }
func (fs noSyncFS) Unwrap() vfs.FS                     { return fs.FS }
func (fs noSyncFS) OpenDir(n string) (vfs.File, error) { return noSync(fs.FS.OpenDir(n)) }
func (fs noSyncFS) Create(n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.Create(n, c))
}
func (fs noSyncFS) OpenReadWrite(n string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	return noSync(fs.FS.OpenReadWrite(n, c, o...))
}
func (fs noSyncFS) ReuseForWrite(o, n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.ReuseForWrite(o, n, c))
}

func noSync(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// seedSegs makes the state the copier leaves after it copied n rolled
// segments of partition segs-0 (the first half stamped two days before
// nowMs, the rest nowMs) and local retention dropped their local files: in logs, the
// partition's directory with its empty active segment at offset n*16 and
// its leader epoch checkpoint, an empty segs-1, and the checkpoint files;
// in the store at meta (closed on return) and in mgr's bucket, n finished
// copies. ccfg is the copier's configuration (broker and instance ids).
func seedSegs(ctx context.Context, dir, logs, meta string, mgr *rsm.Manager, ccfg copier.Config, n int, now int64) error {
	var tmpl [2]segTemplate // [0]: two days old, [1]: new
	var epochData []byte
	for i, ts := range []int64{now - 2*dayMs, now} {
		var err error
		if tmpl[i], epochData, err = segsTemplate(filepath.Join(dir, fmt.Sprintf("seed-template-%d", i), segsTopic+"-0"), ts); err != nil {
			return err
		}
	}
	epochs, err := epoch.Parse(epochData)
	if err != nil {
		return fmt.Errorf("seed template: %w", err)
	}
	pdir := filepath.Join(logs, segsTopic+"-0")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return err
	}
	active := filepath.Join(pdir, kafkalog.FileName(int64(n)*16, ""))
	for _, suffix := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
		if err := os.WriteFile(active+suffix, nil, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(epoch.Path(pdir), epochData, 0o644); err != nil {
		return err
	}
	if err := writeSegsCheckpoints(logs, n); err != nil {
		return err
	}

	store, err := rlmm.Open(rlmm.Config{Dir: meta}, rlmm.WithFS(noSyncFS{vfs.Default}))
	if err != nil {
		return err
	}
	tp := remotelog.TopicPartition{Topic: segsTopic, Partition: 0}
	err = store.EnsurePartition(tp, 0) // the log start offset of the checkpoint file
	if err == nil {
		err = seedCopies(ctx, dir, store, mgr, ccfg, tp, tmpl, epochs, n)
	}
	if err == nil {
		// What local retention records when it drops the copied
		// segments' local files: the local log starts at the active
		// segment.
		_, err = store.AdvanceOffsets(tp, -1, int64(n)*16)
	}
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	return err
}

// seedCopies uploads and records the n copies, seedUploads at a time.
// Each worker writes a copy's .log into its own scratch directory; the
// indexes are the template's (their entries are relative to the base
// offset).
func seedCopies(ctx context.Context, dir string, store *rlmm.Store, mgr *rsm.Manager, ccfg copier.Config, tp remotelog.TopicPartition,
	tmpl [2]segTemplate, epochs []epoch.Entry, n int) error {
	scratch := make(chan string, seedUploads)
	for w := range seedUploads {
		d := filepath.Join(dir, fmt.Sprintf("seed-scratch-%d", w))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		scratch <- d
	}
	var idx [2][2]string // per template: offset index, time index paths
	for i, t := range tmpl {
		for j, data := range [][]byte{t.offsetIdx, t.timeIdx} {
			idx[i][j] = filepath.Join(dir, fmt.Sprintf("seed-index-%d-%d", i, j))
			if err := os.WriteFile(idx[i][j], data, 0o644); err != nil {
				return err
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(seedUploads)
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			d := <-scratch
			defer func() { scratch <- d }()
			k := 1
			if i < n/2 {
				k = 0
			}
			base := int64(i) * 16
			logPath := filepath.Join(d, kafkalog.FileName(base, kafkalog.LogSuffix))
			if err := os.WriteFile(logPath, tmpl[k].at(base), 0o644); err != nil {
				return err
			}
			defer os.Remove(logPath)
			files := rsm.SegmentFiles{Log: logPath, OffsetIndex: idx[k][0], TimeIndex: idx[k][1], LeaderEpochs: epoch.InRange(epochs, base, base+15)}
			meta := remotelog.SegmentMetadata{
				TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: base, EndOffset: base + 15,
				MaxTimestampMs: tmpl[k].maxTimestamp, SizeInBytes: int64(len(tmpl[k].log)), State: remotelog.CopySegmentStarted,
				BrokerID: ccfg.BrokerID, InstanceID: ccfg.InstanceID, SegmentLeaderEpochs: files.LeaderEpochs,
			}
			if err := store.AddSegment(meta); err != nil {
				return err
			}
			if _, err := mgr.CopySegment(gctx, meta, files); err != nil {
				return fmt.Errorf("seed copy at %d: %w", base, err)
			}
			_, err := store.UpdateState(tp, base, meta.ID, remotelog.CopySegmentFinished)
			return err
		})
	}
	return g.Wait()
}
