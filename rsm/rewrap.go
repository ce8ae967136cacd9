package rsm

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/chunked"
)

// RewrapResult is what Rewrap did to one copy.
type RewrapResult struct {
	// From is the KEK the copy's data key was wrapped by; "" for a copy
	// that is not encrypted.
	From string
	// To is the KEK it is wrapped by now (From when unchanged).
	To string
	// Changed: the manifest was rewritten.
	Changed bool
}

// Rewrap moves an encrypted copy's data key to the current KEK
// (Config.Keys.Current) without rewriting any data: it reads the
// manifest under key with its version, checks it whole (the MAC under
// the data key the old KEK unwraps), wraps the same data key under the
// current KEK, replaces the manifest's "encryption" member (which the MAC
// does not cover, so it stays valid; every other member keeps its
// bytes), checks the result reads, and writes it only if the manifest is
// still the version read (a copy deleted or rewritten meanwhile is left
// as it is). A copy not encrypted, or already under the current KEK, is
// left alone. A crash at any point leaves either manifest, each whole.
// Errors: ReadManifest's (a missing KEK: chunked.ErrKeyUnavailable naming
// it), the wrapper's, ErrNotFound or ErrPreconditionFailed (wrapped) when
// the manifest went or changed between the read and the write.
func (m *Manager) Rewrap(ctx context.Context, key string) (RewrapResult, error) {
	data, v, err := m.b.ReadVersioned(ctx, key)
	if err != nil {
		return RewrapResult{}, fmt.Errorf("rewrap %s: %w", key, err)
	}
	mf, _, err := m.parseManifest(ctx, key, data)
	if err != nil {
		return RewrapResult{}, err
	}
	if mf.Encryption == nil {
		return RewrapResult{}, nil
	}
	res := RewrapResult{From: mf.Encryption.KEKID, To: mf.Encryption.KEKID}
	if m.cfg.Keys == nil {
		return res, fmt.Errorf("rewrap %s: %w: this tierd has no keys", key, chunked.ErrKeyUnavailable)
	}
	cur := m.cfg.Keys.Current()
	if cur == "" {
		return res, errors.New("rsm: rewrap needs encryption.key.id, the KEK to move copies to")
	}
	if res.From == cur {
		return res, nil
	}
	aad := chunked.WrapAAD(copyID(remotelog.TopicPartition{Topic: mf.Topic, Partition: mf.Partition}, mf.SegmentID))
	dk, err := m.cfg.Keys.Unwrap(ctx, res.From, mf.Encryption.WrappedKey, aad)
	if err != nil {
		return res, fmt.Errorf("rewrap %s: %w", key, err)
	}
	wrapped, err := m.cfg.Keys.Wrap(ctx, cur, dk, aad)
	clear(dk)
	if err != nil {
		return res, fmt.Errorf("rewrap %s under %q: %w", key, cur, err)
	}
	next, err := chunked.SetMembers(data, map[string]any{"encryption": Envelope{Algorithm: envelopeAlgorithm, KEKID: cur, WrappedKey: wrapped}})
	if err != nil {
		return res, fmt.Errorf("rewrap %s: %w", key, err)
	}
	if _, _, err := m.parseManifest(ctx, key, next); err != nil {
		return res, fmt.Errorf("rewrap %s: the rewritten manifest does not read, not written: %w", key, err)
	}
	crashpoint.Hit("rewrap.read") // read and re-wrapped, not written
	if _, err := m.b.PutIfMatch(ctx, key, next, v); err != nil {
		return res, fmt.Errorf("rewrap %s: %w", key, err)
	}
	crashpoint.Hit("rewrap.written")
	m.Forget(mf.SegmentID)
	res.To, res.Changed = cur, true
	return res, nil
}
