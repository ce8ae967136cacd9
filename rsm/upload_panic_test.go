package rsm_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// panicBucket panics in the Upload of a key ending in uploadSuffix and in
// the Attributes of a key ending in attrSuffix.
type panicBucket struct {
	rsm.Bucket
	uploadSuffix, attrSuffix string
}

func (b *panicBucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	if b.uploadSuffix != "" && strings.HasSuffix(key, b.uploadSuffix) {
		panic("injected panic in upload of " + key)
	}
	return b.Bucket.Upload(ctx, key, r, size)
}

func (b *panicBucket) Attributes(ctx context.Context, key string) (rsm.ObjectAttributes, error) {
	if b.attrSuffix != "" && strings.HasSuffix(key, b.attrSuffix) {
		panic("injected panic in attributes of " + key)
	}
	return b.Bucket.Attributes(ctx, key)
}

// TestCopySegmentPanicIsAnError: a panic in either of a copy's upload
// goroutines (the .log's, the small objects') comes back from CopySegment
// as an error wrapping rsm.ErrPanic, and the copy's objects are removed.
// The copier recovers panics only in its own goroutine, so a panic left
// in one of CopySegment's would end the process.
func TestCopySegmentPanicIsAnError(t *testing.T) {
	for _, suffix := range []string{kafkalog.LogSuffix, kafkalog.TimeIndexSuffix, ".leader-epoch-checkpoint"} {
		t.Run(suffix, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b := &panicBucket{Bucket: memory.New(), uploadSuffix: suffix}
			m, files, meta := copyRig(t, b)
			mf, err := m.CopySegment(ctx, meta, files)
			if !errors.Is(err, rsm.ErrPanic) || !strings.Contains(err.Error(), "injected panic in upload of") {
				t.Fatalf("copy = %v, %v; want an error wrapping rsm.ErrPanic", mf, err)
			}
			var left []string
			b.Iter(ctx, "", func(k string) error { left = append(left, k); return nil })
			if len(left) != 0 {
				t.Fatalf("objects left by the failed copy: %v", left)
			}
		})
	}
}

// TestVerifyPresentPanicIsAnError: a panic in one of VerifyPresent's
// concurrent Attributes requests comes back as an error wrapping
// rsm.ErrPanic.
func TestVerifyPresentPanicIsAnError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := &panicBucket{Bucket: memory.New()}
	m, files, meta := copyRig(t, b)
	mf, err := m.CopySegment(ctx, meta, files)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.VerifyPresent(ctx, mf); err != nil {
		t.Fatalf("verify of a whole copy: %v", err)
	}
	b.attrSuffix = kafkalog.IndexSuffix
	if err := m.VerifyPresent(ctx, mf); !errors.Is(err, rsm.ErrPanic) || !strings.Contains(err.Error(), "injected panic in attributes of") {
		t.Fatalf("verify = %v, want an error wrapping rsm.ErrPanic", err)
	}
}
