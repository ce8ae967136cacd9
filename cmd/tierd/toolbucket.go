package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierd/tierd/rsm"
)

// checkBucket checks the bucket b under prefix with one request, as tierd
// run does at start, for a tool that reads or writes the bucket (verify,
// rlmm rebuild): a missing bucket or missing or refused credentials then
// fail the tool once, before any work, saying what is wrong, where the
// credentials came from and how to fix it (*rsm.BucketError), instead of
// as the store's bare answer for every object. nil for a bucket that
// cannot check itself. Errors: the *rsm.BucketError; an unreachable
// store's error, wrapped with the bucket's name. Bounded by rsm.ProbeTimeout.
func checkBucket(ctx context.Context, b rsm.Bucket, prefix string) error {
	ch, ok := b.(rsm.Checker)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, rsm.ProbeTimeout)
	defer cancel()
	err := ch.Check(ctx, prefix)
	if err == nil || errors.Is(err, rsm.ErrMisconfigured) {
		return err // a *rsm.BucketError names the bucket
	}
	return fmt.Errorf("%s does not answer: %w", b.Name(), err)
}
