package rsm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/tierd/tierd/internal/remotelog"
)

// VerifyObject re-reads an object and checks its size and checksum against
// the manifest; it returns ErrChecksum (wrapped) on a mismatch.
func (m *Manager) VerifyObject(ctx context.Context, o ObjectInfo) error {
	rc, err := m.b.GetRange(ctx, o.Key, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return err
	}
	if n != o.Size || hex.EncodeToString(h.Sum(nil)) != o.SHA256 {
		return fmt.Errorf("%w: %s (%d bytes)", ErrChecksum, o.Key, n)
	}
	return nil
}

// VerifyPresent checks that every object of a copy is stored with the size
// its manifest records: a copy is only recorded finished when it is whole,
// even if something deleted part of it during the upload.
func (m *Manager) VerifyPresent(ctx context.Context, mf *Manifest) error {
	for suffix, o := range mf.Objects {
		a, err := m.b.Attributes(ctx, o.Key)
		if err != nil {
			return fmt.Errorf("verify %s: %w", o.Key, err)
		}
		if a.Size != o.Size {
			return fmt.Errorf("%w: %s object %s holds %d bytes, uploaded %d", ErrChecksum, suffix, o.Key, a.Size, o.Size)
		}
	}
	return nil
}

// MissingObjects checks, with one Attributes request each, that the
// objects a read and a rebuild need of a copy are stored: its .log,
// offset and time indexes and manifest. It returns the suffixes of those
// missing (none: nil). Errors: transport errors.
func (m *Manager) MissingObjects(ctx context.Context, meta remotelog.SegmentMetadata) ([]string, error) {
	var missing []string
	for _, suffix := range []string{logSuffix, remotelog.OffsetIndex.Suffix(), remotelog.TimeIndex.Suffix(), manifestSuffix} {
		if _, err := m.b.Attributes(ctx, m.Key(meta, suffix)); errors.Is(err, ErrNotFound) {
			missing = append(missing, suffix)
		} else if err != nil {
			return missing, fmt.Errorf("check %s: %w", m.Key(meta, suffix), err)
		}
	}
	return missing, nil
}
