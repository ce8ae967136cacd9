package rsmtest

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm"
)

// Snapshot returns every object of b under prefix ("" for all) with its
// bytes, read through b: what a test compares before and after a tool
// runs against a bucket it shares.
func Snapshot(t testing.TB, b rsm.BucketReader, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	err := b.Iter(ctx, prefix, func(k string) error {
		rc, err := b.GetRange(ctx, k, 0, -1)
		if err != nil {
			return err
		}
		defer rc.Close()
		data, err := io.ReadAll(rc)
		out[k] = string(data)
		return err
	})
	if err != nil {
		t.Fatalf("snapshot of %q: %v", prefix, err)
	}
	return out
}

// Diff describes how after differs from before, one line per key
// (missing, changed with both sizes, or added), sorted; "" when they hold
// the same keys with the same bytes.
func Diff(before, after map[string]string) string {
	var lines []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			lines = append(lines, "missing "+k)
		} else if w != v {
			lines = append(lines, fmt.Sprintf("changed %s (%d bytes, now %d)", k, len(v), len(w)))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			lines = append(lines, "added "+k)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
