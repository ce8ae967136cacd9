package rsm

import (
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/tierd/tierd/internal/remotelog"
)

// VerifyObject re-reads an object and checks its size and checksum against
// the manifest (CRC-32C, or SHA-256 in a manifest of format version 1;
// each one o records). Errors: as VerifyObjectProgress.
func (m *Manager) VerifyObject(ctx context.Context, o ObjectInfo) error {
	return m.VerifyObjectProgress(ctx, o, nil)
}

// VerifyObjectProgress is VerifyObject that tells onRead, when set, how
// many bytes each read returned, as the object is read (for a progress
// display). Errors: ErrChecksum (wrapped) on a mismatch, ErrBadManifest
// (wrapped) when o records no checksum, ErrNotFound (wrapped) for a
// missing object, transport errors.
func (m *Manager) VerifyObjectProgress(ctx context.Context, o ObjectInfo, onRead func(n int64)) error {
	h, r, rc, err := m.openStored(ctx, o, onRead)
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(h, r)
	if err != nil {
		return err
	}
	if n != o.Size || !h.match(o) {
		return fmt.Errorf("%w: %s (%d bytes)", ErrChecksum, o.Key, n)
	}
	return nil
}

// openStored GETs object o whole, with the sums its manifest records
// checked over it, and its body told to onRead (when set) as it is read.
func (m *Manager) openStored(ctx context.Context, o ObjectInfo, onRead func(n int64)) (*objectSums, io.Reader, io.Closer, error) {
	h, err := newObjectSums(o)
	if err != nil {
		return nil, nil, nil, err
	}
	rc, err := m.b.GetRange(ctx, o.Key, 0, -1)
	if err != nil {
		return nil, nil, nil, err
	}
	var r io.Reader = rc
	if onRead != nil {
		r = &progressReader{r: rc, onRead: onRead}
	}
	return h, r, rc, nil
}

// VerifyObjectIn verifies object suffix of the copy mf describes:
// VerifyObjectProgress for an object stored as it came; for one in
// chunked form, its stored bytes' size and CRC-32C and every chunk
// decoded and checked (its CRC, its seal, its original size), and the
// original bytes' size (and CRC-32C when recorded). onRead is told the
// stored bytes each read returned. Errors: VerifyObjectProgress's, and
// chunked.ErrDamaged (wrapped) for a chunk that fails.
func (m *Manager) VerifyObjectIn(ctx context.Context, mf *Manifest, suffix string, onRead func(n int64)) error {
	o, ok := mf.Objects[suffix]
	if !ok {
		return fmt.Errorf("%w: the manifest lists no %s", ErrBadManifest, suffix)
	}
	if o.Chunked == nil {
		return m.VerifyObjectProgress(ctx, o, onRead)
	}
	keys, err := m.openKeys(ctx, o.Key, mf) // mf came from the caller: its key is not at hand
	if err != nil {
		return err
	}
	return m.readDecodedProgress(ctx, mf, keys, suffix, io.Discard, onRead)
}

// VerifyPresent checks that every object of a copy is stored with the size
// its manifest records: a copy is only recorded finished when it is whole,
// even if something deleted part of it during the upload. Errors: the
// bucket's (ErrNotFound for a missing object), ErrChecksum for a size
// that differs, ErrPanic for a panic in one of its requests.
func (m *Manager) VerifyPresent(ctx context.Context, mf *Manifest) error {
	// The requests go at once: a copy's objects are a handful, and each
	// answer is a round trip the copy waits for.
	g, gctx := errgroup.WithContext(ctx)
	for suffix, o := range mf.Objects {
		goRecover(g, "check of "+o.Key, func() error {
			a, err := m.b.Attributes(gctx, o.Key)
			if err != nil {
				return fmt.Errorf("verify %s: %w", o.Key, err)
			}
			if a.Size != o.Size {
				return fmt.Errorf("%w: %s object %s holds %d bytes, uploaded %d", ErrChecksum, suffix, o.Key, a.Size, o.Size)
			}
			return nil
		})
	}
	return g.Wait()
}

// MissingObjects checks, with one Attributes request each, that the
// objects a read and a rebuild need of a copy are stored: its .log,
// offset and time indexes and manifest, and that the .log holds at least
// the row's SizeInBytes (a truncated .log has bytes missing). It returns
// the suffixes of those missing (none: nil), a short .log as ".log (holds
// N of its M bytes)". Errors: transport errors.
func (m *Manager) MissingObjects(ctx context.Context, meta remotelog.SegmentMetadata) ([]string, error) {
	var missing []string
	for _, suffix := range []string{logSuffix, remotelog.OffsetIndex.Suffix(), remotelog.TimeIndex.Suffix(), manifestSuffix} {
		a, err := m.b.Attributes(ctx, m.Key(meta, suffix))
		switch {
		case errors.Is(err, ErrNotFound):
			missing = append(missing, suffix)
		case err != nil:
			return missing, fmt.Errorf("check %s: %w", m.Key(meta, suffix), err)
		case suffix == logSuffix && meta.Form == "" && a.Size < meta.SizeInBytes:
			missing = append(missing, fmt.Sprintf("%s (holds %d of its %d bytes)", suffix, a.Size, meta.SizeInBytes))
		case suffix == logSuffix && meta.Form != "" && a.Size < meta.StoredSizeInBytes:
			missing = append(missing, fmt.Sprintf("%s (holds %d of its %d stored bytes)", suffix, a.Size, meta.StoredSizeInBytes))
		}
	}
	return missing, nil
}

// VerifyCopy reads a copy's manifest, checks that it describes meta
// (segment id, partition, offsets, size), then reads every object it
// lists and checks its size and checksum; an object in chunked form is
// decoded too, every chunk checked (its CRC, its seal, its original
// size). Errors: ErrNotFound (wrapped) for a missing object or manifest;
// ErrChecksum (wrapped) for an object that differs or a manifest that
// describes another copy; ErrBadManifest; chunked.ErrDamaged and the key
// errors of ReadManifest (wrapped); transport errors.
func (m *Manager) VerifyCopy(ctx context.Context, meta remotelog.SegmentMetadata) error {
	mf, keys, err := m.readManifest(ctx, m.Key(meta, manifestSuffix))
	if err != nil {
		return err
	}
	if mf.SegmentID != meta.ID || mf.Topic != meta.TopicPartition.Topic || mf.Partition != meta.TopicPartition.Partition ||
		mf.StartOffset != meta.StartOffset || mf.EndOffset != meta.EndOffset || mf.SizeInBytes != meta.SizeInBytes {
		return fmt.Errorf("%w: manifest of %s describes offsets %d-%d, %d bytes; the row %d-%d, %d bytes", ErrChecksum,
			meta.ID, mf.StartOffset, mf.EndOffset, mf.SizeInBytes, meta.StartOffset, meta.EndOffset, meta.SizeInBytes)
	}
	if err := checkForm(m.Key(meta, manifestSuffix), meta, mf); err != nil {
		return err
	}
	for suffix, o := range mf.Objects {
		if o.Chunked != nil {
			if err := m.readDecoded(ctx, mf, keys, suffix, io.Discard); err != nil {
				return err
			}
			continue
		}
		if err := m.VerifyObject(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// progressReader tells onRead the size of every read.
type progressReader struct {
	r      io.Reader
	onRead func(int64)
}

func (c *progressReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.onRead(int64(n))
	}
	return n, err
}
