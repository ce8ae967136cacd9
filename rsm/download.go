package rsm

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/chunked"
)

// DownloadedCopy is a finished copy read back from the bucket, every part
// checked against its manifest: what a remote compaction merges.
type DownloadedCopy struct {
	// Manifest is the copy's manifest, which describes the row asked for.
	Manifest *Manifest
	// Log is the path of the local file holding the copy's .log object
	// (Manifest.SizeInBytes bytes).
	Log string
	// TxnIndex is the copy's .txnindex object (aborted transactions, in
	// Kafka's format), nil when the copy has none.
	TxnIndex []byte
	// ProducerSnapshot is the copy's .snapshot object (producer state at
	// its end offset + 1), nil when the copy has none.
	ProducerSnapshot []byte
}

// DownloadCopy reads the copy that the COPY_SEGMENT_FINISHED row meta
// names, by key (nothing is listed): its manifest, which must describe
// meta (segment id, partition, offsets, size); its .log into the new file
// dir/<20-digit base offset>-<segment id>.log, streamed; and its
// transaction index and producer snapshot, when the manifest lists them,
// into memory. Each object's size and checksum (CRC-32C, or SHA-256 in a
// manifest of format version 1) must match the manifest, so
// that a damaged copy is never taken for a whole one. On an error the
// .log file written so far is removed.
//
// Errors: ErrNotFound (wrapped) for a missing object or manifest;
// ErrChecksum (wrapped) for an object that differs from the manifest or a
// manifest that describes another copy; ErrBadManifest; transport and
// disk errors.
func (m *Manager) DownloadCopy(ctx context.Context, meta remotelog.SegmentMetadata, dir string) (_ *DownloadedCopy, err error) {
	mf, keys, err := m.readManifest(ctx, m.Key(meta, manifestSuffix))
	if err != nil {
		return nil, err
	}
	if mf.SegmentID != meta.ID || mf.Topic != meta.TopicPartition.Topic || mf.Partition != meta.TopicPartition.Partition ||
		mf.StartOffset != meta.StartOffset || mf.EndOffset != meta.EndOffset || mf.SizeInBytes != meta.SizeInBytes {
		return nil, fmt.Errorf("%w: manifest of %s describes offsets %d-%d, %d bytes; the row %d-%d, %d bytes", ErrChecksum,
			meta.ID, mf.StartOffset, mf.EndOffset, mf.SizeInBytes, meta.StartOffset, meta.EndOffset, meta.SizeInBytes)
	}
	if err := checkForm(m.Key(meta, manifestSuffix), meta, mf); err != nil {
		return nil, err
	}
	out := &DownloadedCopy{Manifest: mf, Log: filepath.Join(dir, fmt.Sprintf("%020d-%s%s", meta.StartOffset, meta.ID, logSuffix))}
	o, ok := mf.Objects[logSuffix]
	if !ok || o.Chunked == nil && o.Size != mf.SizeInBytes {
		return nil, fmt.Errorf("%w: manifest of %s: .log object of %d bytes, copy of %d", ErrBadManifest, meta.ID, o.Size, mf.SizeInBytes)
	}
	f, err := os.OpenFile(out.Log, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(out.Log)
		}
	}()
	if err := m.readDecoded(ctx, mf, keys, logSuffix, f); err != nil {
		return nil, err
	}
	for _, opt := range []struct {
		suffix string
		dst    *[]byte
	}{{kafkalog.TxnIndexSuffix, &out.TxnIndex}, {kafkalog.SnapshotSuffix, &out.ProducerSnapshot}} {
		if _, ok := mf.Objects[opt.suffix]; !ok {
			continue
		}
		w := &byteSink{b: []byte{}} // an empty object is present, not nil
		if err := m.readDecoded(ctx, mf, keys, opt.suffix, w); err != nil {
			return nil, err
		}
		*opt.dst = w.b
	}
	if (out.TxnIndex != nil) != mf.TxnIndexPresent || (out.ProducerSnapshot != nil) != mf.ProducerSnapshotPresent {
		return nil, fmt.Errorf("%w: manifest of %s: its objects and its presence flags disagree", ErrBadManifest, meta.ID)
	}
	return out, nil
}

// readChecked copies object o into w and checks its size and checksums
// against the manifest's record of it.
func (m *Manager) readChecked(ctx context.Context, o ObjectInfo, w io.Writer) error {
	h, err := newObjectSums(o)
	if err != nil {
		return err
	}
	rc, err := m.b.GetRange(ctx, o.Key, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(io.MultiWriter(w, h), rc)
	if err != nil {
		return fmt.Errorf("read %s: %w", o.Key, err)
	}
	if n != o.Size || !h.match(o) {
		return fmt.Errorf("%w: %s holds %d bytes that differ from its manifest's record (%d bytes)", ErrChecksum, o.Key, n, o.Size)
	}
	return nil
}

// readDecoded copies the original bytes of mf's object suffix into w,
// checked: as readChecked for an object stored as it came; for one in
// chunked form, its stored bytes' size and CRC-32C, each chunk as it is
// decoded, and the original bytes' size and CRC-32C when recorded.
// keys are the copy's (readManifest's), nil when it is not encrypted.
func (m *Manager) readDecoded(ctx context.Context, mf *Manifest, keys *chunked.CopyKeys, suffix string, w io.Writer) error {
	return m.readDecodedProgress(ctx, mf, keys, suffix, w, nil)
}

// readDecodedProgress is readDecoded telling onRead, when set, how many
// stored bytes each read returned.
func (m *Manager) readDecodedProgress(ctx context.Context, mf *Manifest, keys *chunked.CopyKeys, suffix string, w io.Writer, onRead func(int64)) error {
	o := mf.Objects[suffix]
	if o.Chunked == nil {
		return m.readChecked(ctx, o, w)
	}
	l, err := o.layout()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadManifest, o.Key, err)
	}
	var s *chunked.Sealer
	if keys != nil {
		s = keys.Sealer
	}
	h, body, rc, err := m.openStored(ctx, o, onRead)
	if err != nil {
		return err
	}
	defer rc.Close()
	stored := &countingReader{r: io.TeeReader(body, h)}
	orig := crc32.New(castagnoli)
	n, err := chunked.NewReader(stored, m.codec, l, s, suffix, 0, l.OriginalSize).WriteTo(io.MultiWriter(w, orig))
	if err != nil {
		return m.cfg.Metrics.failed(fmt.Errorf("read %s: %w", o.Key, err), s != nil)
	}
	if extra, _ := io.Copy(io.Discard, stored); extra > 0 || stored.n != o.Size || !h.match(o) {
		return fmt.Errorf("%w: %s holds %d stored bytes that differ from its manifest's record (%d bytes)", ErrChecksum, o.Key, stored.n, o.Size)
	}
	if n != o.Chunked.OriginalSize || o.Chunked.OriginalCRC32C != "" && crc32cHex(orig.Sum32()) != o.Chunked.OriginalCRC32C {
		return fmt.Errorf("%w: %s decodes to %d bytes that differ from the original's record (%d bytes)", ErrChecksum, o.Key, n, o.Chunked.OriginalSize)
	}
	return nil
}

// byteSink collects what is written to it.
type byteSink struct{ b []byte }

func (s *byteSink) Write(p []byte) (int, error) {
	s.b = append(s.b, p...)
	return len(p), nil
}
