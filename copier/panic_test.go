package copier

import (
	"context"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// panicOnceBucket panics, once, in the Upload of a key containing
// uploadOn and in the Attributes of a key containing attrOn.
type panicOnceBucket struct {
	rsm.Bucket
	mu               sync.Mutex
	uploadOn, attrOn string
}

func (b *panicOnceBucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	b.mu.Lock()
	hit := b.uploadOn != "" && strings.Contains(key, b.uploadOn)
	if hit {
		b.uploadOn = ""
	}
	b.mu.Unlock()
	if hit {
		panic("injected panic in upload of " + key)
	}
	return b.Bucket.Upload(ctx, key, r, size)
}

func (b *panicOnceBucket) Attributes(ctx context.Context, key string) (rsm.ObjectAttributes, error) {
	b.mu.Lock()
	hit := b.attrOn != "" && strings.Contains(key, b.attrOn)
	if hit {
		b.attrOn = ""
	}
	b.mu.Unlock()
	if hit {
		panic("injected panic in attributes of " + key)
	}
	return b.Bucket.Attributes(ctx, key)
}

// TestUploadPanicFailsTheCopy: a panic anywhere in a copy's upload or its
// check that every object is stored (rsm runs parts of both in goroutines
// of their own) fails that copy like any error, without ending the
// process: the local segments stay, the attempt's objects are removed and
// its row is deleted, and the next pass copies the segment.
func TestUploadPanicFailsTheCopy(t *testing.T) {
	for _, tc := range []struct{ name, uploadOn, attrOn string }{
		{name: "log upload", uploadOn: ".log"},
		{name: "index upload", uploadOn: ".timeindex"},
		{name: "verify", attrOn: ".index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.FileDeleteDelayMs = 0
			cfg.Retention.LocalRetentionMs = ptr(0)
			b := &panicOnceBucket{Bucket: memory.New(), uploadOn: tc.uploadOn, attrOn: tc.attrOn}
			r := newRig(t, cfg, b)
			old := r.now.UnixMilli() - 3_600_000
			writeSegment(t, r.dir(), 0, seq(0, 5), same(old, 5), 10)
			writeSegment(t, r.dir(), 5, nil, nil, 0)
			if _, err := r.c.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "injected panic") {
				t.Fatalf("sync = %v, want the injected panic as an error", err)
			}
			if !reflect.DeepEqual(r.localBases(), []int64{0, 5}) {
				t.Fatalf("uncopied segments deleted: %v", r.localBases())
			}
			if st := r.states(); st[remotelog.DeleteSegmentFinished] != 1 || st[remotelog.CopySegmentFinished] != 0 {
				t.Fatalf("states after the panic %v", st)
			}
			if objs := r.objects(); len(objs) != 0 {
				t.Fatalf("failed copy left objects %v", objs)
			}
			r.sync()
			if st := r.states(); st[remotelog.CopySegmentFinished] != 1 {
				t.Fatalf("after retry: states %v", st)
			}
			if !reflect.DeepEqual(r.localBases(), []int64{5}) {
				t.Fatalf("local after retry: %v", r.localBases())
			}
		})
	}
}
