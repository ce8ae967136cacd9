package rsm

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime/debug"

	"golang.org/x/sync/errgroup"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/chunked"
)

// open opens the file at p through files.Open, or os.Open when unset.
func (files SegmentFiles) open(p string) (File, error) {
	if files.Open != nil {
		return files.Open(p)
	}
	return os.Open(p)
}

// readFile reads the whole file at p through files.Open, or os.ReadFile
// when unset.
func (files SegmentFiles) readFile(p string) ([]byte, error) {
	if files.Open == nil {
		return os.ReadFile(p)
	}
	f, err := files.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return data, nil
}

// epochObject returns the bytes of the .leader-epoch-checkpoint object:
// files.LeaderEpochCheckpoint when given, else the checkpoint text of
// files.LeaderEpochs.
func (files SegmentFiles) epochObject() []byte {
	if files.LeaderEpochCheckpoint != nil {
		return files.LeaderEpochCheckpoint
	}
	return epoch.Encode(files.LeaderEpochs)
}

// throttled applies files.Throttle to r.
func (files SegmentFiles) throttled(ctx context.Context, r io.Reader) io.Reader {
	if files.Throttle == nil {
		return r
	}
	return files.Throttle(ctx, r)
}

// CopySegment uploads a segment's files for the COPY_SEGMENT_STARTED row
// meta, data first and the manifest last, and returns the manifest. Files
// are streamed; indexes are cut to their real entries. The copy takes
// the form meta.Form names: "" as the files are, remotelog.FormChunked in
// chunks transformed as Config.Objects says (NewCopyForm). The .log goes
// whole, or, when meta.LocalSizeInBytes is set, as its first
// meta.SizeInBytes bytes (the zero tail of a preallocated segment is left
// out); the file must then be meta.LocalSizeInBytes long. The small
// objects (offset and time indexes, transaction index, producer snapshot,
// leader-epoch checkpoint) go up one after another while the .log goes up,
// so their requests' round trips hide behind its transfer; the manifest
// goes only once every one of them is stored. On any error the objects
// this call uploaded are deleted (best effort) and the error is returned;
// the caller then marks the row for deletion. A panic in either upload
// goroutine is returned as an error wrapping ErrPanic.
func (m *Manager) CopySegment(ctx context.Context, meta remotelog.SegmentMetadata, files SegmentFiles) (_ *Manifest, err error) {
	if meta.LocalSizeInBytes != 0 && (meta.SizeInBytes < 0 || meta.SizeInBytes >= meta.LocalSizeInBytes) {
		return nil, fmt.Errorf("rsm: copy of %d bytes of a %d-byte .log: the copy must be shorter than the file", meta.SizeInBytes, meta.LocalSizeInBytes)
	}
	mf := &Manifest{
		FormatVersion: ManifestFormatVersion, Topic: meta.TopicPartition.Topic, TopicID: meta.TopicID, Partition: meta.TopicPartition.Partition,
		SegmentID: meta.ID, StartOffset: meta.StartOffset, EndOffset: meta.EndOffset, MaxTimestampMs: meta.MaxTimestampMs,
		SizeInBytes: meta.SizeInBytes, LocalSizeInBytes: meta.LocalSizeInBytes, LeaderEpochs: files.LeaderEpochs,
		TxnIndexPresent: files.TxnIndex != "", ProducerSnapshotPresent: files.ProducerSnapshot != "",
		CreatedMs: m.now().UnixMilli(), BrokerID: meta.BrokerID, InstanceID: meta.InstanceID, CopyLeaderEpoch: meta.CopyLeaderEpoch, Objects: map[string]ObjectInfo{},
		Compacted:    meta.Compacted,
		CompactionOf: meta.CompactionOf,
		BrokerOwned:  files.BrokerOwned,
	}
	small := []smallObject{
		{suffix: kafkalog.IndexSuffix, path: files.OffsetIndex, index: true},
		{suffix: kafkalog.TimeIndexSuffix, path: files.TimeIndex, index: true},
	}
	for _, opt := range []smallObject{{suffix: kafkalog.TxnIndexSuffix, path: files.TxnIndex}, {suffix: kafkalog.SnapshotSuffix, path: files.ProducerSnapshot}} {
		if opt.path != "" {
			small = append(small, opt)
		}
	}
	small = append(small, smallObject{suffix: remotelog.LeaderEpochIndex.Suffix(), data: files.epochObject()})
	// Every key is recorded before any upload starts, so that a failure
	// anywhere cleans up whatever either goroutine stored.
	mf.Objects[logSuffix] = ObjectInfo{Key: m.Key(meta, logSuffix)}
	for _, o := range small {
		mf.Objects[o.suffix] = ObjectInfo{Key: m.Key(meta, o.suffix)}
	}
	defer func() {
		if err != nil {
			m.deleteObjects(context.WithoutCancel(ctx), mf)
		}
	}()
	keys, err := m.startChunked(ctx, meta.Form, mf)
	if err != nil {
		return nil, err
	}
	var form *copyForm
	if mf.Form() == remotelog.FormChunked {
		form = &copyForm{keys: keys}
	}
	logPart := part{n: -1, progress: files.Progress}
	if meta.LocalSizeInBytes > 0 {
		logPart = part{n: meta.SizeInBytes, fileSize: meta.LocalSizeInBytes, progress: files.Progress}
	}
	infos := make([]ObjectInfo, len(small)+1) // the .log's last; each goroutine writes its own
	g, gctx := errgroup.WithContext(ctx)
	goRecover(g, "upload of "+mf.Objects[logSuffix].Key, func() (err error) {
		infos[len(small)], err = m.uploadFile(gctx, mf.Objects[logSuffix].Key, logSuffix, files.Log, logPart, files, form)
		return err
	})
	goRecover(g, "upload of the small objects of "+mf.Objects[logSuffix].Key, func() error {
		for i, o := range small {
			var err error
			if infos[i], err = m.uploadSmall(gctx, mf.Objects[o.suffix].Key, o, meta.StartOffset, files, form); err != nil {
				return err
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	mf.Objects[logSuffix] = infos[len(small)]
	for i, o := range small {
		mf.Objects[o.suffix] = infos[i]
	}
	if files.BeforeManifest != nil {
		if err := files.BeforeManifest(ctx); err != nil {
			return nil, err
		}
	}
	body, err := manifestBody(mf, keys)
	if err != nil {
		return nil, err
	}
	key := m.Key(meta, manifestSuffix)
	// Every data object is stored, the manifest (and with it, for an
	// encrypted copy, the only wrapped copy of its data key) is not.
	crashpoint.Hit("copy.objects-uploaded")
	if err := m.b.Upload(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return nil, fmt.Errorf("upload %s: %w", key, err)
	}
	return mf, nil
}

// goRecover runs f in one of g's goroutines and returns a panic in f as
// an error wrapping ErrPanic, with what f was doing and the panic's stack.
// A caller's recover (the copier's, around a copy) cannot catch a panic in
// another goroutine: left alone, it would end the process.
func goRecover(g *errgroup.Group, what string, f func() error) {
	g.Go(func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w in %s: %v\n%s", ErrPanic, what, r, debug.Stack())
			}
		}()
		return f()
	})
}

// smallObject is one of a copy's objects besides the .log and the
// manifest: a file (an index file is cut to its real entries) or bytes.
type smallObject struct {
	suffix, path string
	index        bool   // an offset or time index file
	data         []byte // the object's bytes, when path is ""
}

// uploadSmall uploads one small object under key and returns its
// ObjectInfo. Errors: an unreadable or malformed index file, upload errors.
func (m *Manager) uploadSmall(ctx context.Context, key string, o smallObject, base int64, files SegmentFiles, form *copyForm) (ObjectInfo, error) {
	switch {
	case o.index:
		data, err := realIndex(files, o.path, base, o.suffix)
		if err != nil {
			return ObjectInfo{}, err
		}
		return m.uploadBytes(ctx, key, o.suffix, data, files, form)
	case o.path != "":
		return m.uploadFile(ctx, key, o.suffix, o.path, part{n: -1}, files, form)
	default:
		return m.uploadBytes(ctx, key, o.suffix, o.data, files, form)
	}
}

// copyForm is how a chunked copy's objects are encoded; a nil *copyForm
// stores them as they came.
type copyForm struct {
	keys *chunked.CopyKeys // nil: not encrypted
}

// realIndex reads an index file (through files.Open when set) and
// returns its real entries' bytes.
func realIndex(files SegmentFiles, p string, base int64, suffix string) ([]byte, error) {
	data, err := files.readFile(p)
	if err != nil {
		return nil, err
	}
	var n int
	if suffix == kafkalog.IndexSuffix {
		var e []index.OffsetEntry
		e, err = index.ParseOffsetIndex(data, base)
		n = len(e) * index.OffsetEntrySize
	} else {
		var e []index.TimeEntry
		e, err = index.ParseTimeIndex(data, base)
		n = len(e) * index.TimeEntrySize
	}
	if err != nil {
		return nil, kafkalog.WithFile(err, p)
	}
	return data[:n], nil
}

// part says how much of a file to upload: n bytes from its start, from a
// file of fileSize bytes; n -1 uploads the whole file, whatever its size.
// progress, when set, is told the bytes read so far.
type part struct {
	n, fileSize int64
	progress    func(int64)
}

// uploadFile uploads the file at p (or its first pt.n bytes) under key,
// taking its CRC-32C in the same read, and returns its ObjectInfo.
// Errors: the file's size is not pt.fileSize, or changed while it was
// read; open, read and upload errors.
func (m *Manager) uploadFile(ctx context.Context, key, suffix, p string, pt part, files SegmentFiles, form *copyForm) (ObjectInfo, error) {
	f, err := files.open(p)
	if err != nil {
		return ObjectInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ObjectInfo{}, err
	}
	size := st.Size()
	if pt.n >= 0 {
		if size != pt.fileSize {
			return ObjectInfo{}, fmt.Errorf("upload the first %d bytes of %s: the file holds %d bytes, not %d (file changed since it was checked)", pt.n, p, size, pt.fileSize)
		}
		size = pt.n
	}
	if form != nil {
		src := &countingReader{r: io.LimitReader(f, size), progress: pt.progress}
		info, err := m.encodeUpload(ctx, key, suffix, src, size, form.keys, files)
		if err == nil && src.n != size {
			err = fmt.Errorf("upload %s: read %d of %d bytes (file changed during copy)", key, src.n, size)
		}
		return info, err
	}
	h := crc32.New(castagnoli)
	cr := &countingReader{r: io.TeeReader(files.throttled(ctx, io.LimitReader(f, size)), h), progress: pt.progress}
	if err := m.b.Upload(ctx, key, cr, size); err != nil {
		return ObjectInfo{}, fmt.Errorf("upload %s: %w", key, err)
	}
	if cr.n != size {
		return ObjectInfo{}, fmt.Errorf("upload %s: read %d of %d bytes (file changed during copy)", key, cr.n, size)
	}
	return ObjectInfo{Key: key, Size: cr.n, CRC32C: crc32cHex(h.Sum32())}, nil
}

// uploadBytes uploads data under key and returns its ObjectInfo. Errors:
// upload errors.
func (m *Manager) uploadBytes(ctx context.Context, key, suffix string, data []byte, files SegmentFiles, form *copyForm) (ObjectInfo, error) {
	if form != nil {
		return m.encodeUpload(ctx, key, suffix, bytes.NewReader(data), int64(len(data)), form.keys, files)
	}
	if err := m.b.Upload(ctx, key, files.throttled(ctx, bytes.NewReader(data)), int64(len(data))); err != nil {
		return ObjectInfo{}, fmt.Errorf("upload %s: %w", key, err)
	}
	return ObjectInfo{Key: key, Size: int64(len(data)), CRC32C: crc32cHex(crc32.Checksum(data, castagnoli))}, nil
}

// countingReader counts the bytes read through it and reports the count
// to progress, when set, after each read.
type countingReader struct {
	r        io.Reader
	n        int64
	progress func(int64) // nil: none
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if n > 0 && c.progress != nil {
		c.progress(c.n)
	}
	return n, err
}
