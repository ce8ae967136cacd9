package rsmtest

import "github.com/tierd/tierd/rsm"

// CountingBucket is rsm.CountingBucket, kept here for the tests that
// name it so.
type CountingBucket = rsm.CountingBucket

// Count wraps b in an rsm.CountingBucket.
func Count(b rsm.Bucket) *CountingBucket { return rsm.Count(b) }
