package remoteread

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierd/tierd/rsm"
)

// ErrStoreUnreachable: a read failed, or could not finish within
// remote.fetch.max.wait.ms, while the object store does not answer (see
// WithStoreHealth). The store's last answer follows in the message.
// Retryable: UNAVAILABLE.
var ErrStoreUnreachable = errors.New("fetch: object store unreachable")

// WithStoreHealth sets a function that returns nil while the object store
// answers and why not while it does not (tierd's periodic bucket probe).
// A read that fails with a retryable error while it is not nil fails with
// ErrStoreUnreachable and that reason instead, so that a reader learns the
// store is down rather than that its data is still loading.
func WithStoreHealth(fn func() error) Option { return func(s *Engine) { s.storeDown = fn } }

// unreachable returns err, marked ErrStoreUnreachable when it is a
// retryable failure and the store does not answer, or when the bucket
// itself found the whole store unavailable (rsm.ErrUnreachable: a
// filesystem bucket's root directory gone) before the probe did.
func (s *Engine) unreachable(err error) error {
	var re *RangeError
	if errors.Is(err, rsm.ErrUnreachable) && !errors.Is(err, ErrStoreUnreachable) {
		return fmt.Errorf("%w: %w", ErrStoreUnreachable, err)
	}
	switch {
	case err == nil || s.storeDown == nil,
		errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrNotTiered), errors.Is(err, ErrDataLoss), errors.As(err, &re),
		errors.Is(err, context.Canceled):
		return err
	}
	if down := s.storeDown(); down != nil {
		return fmt.Errorf("%w: %w (read: %w)", ErrStoreUnreachable, down, err)
	}
	return err
}
