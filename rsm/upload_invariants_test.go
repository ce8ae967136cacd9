package rsm_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// countThrottle is a SegmentFiles.Throttle that counts the bytes read
// through it, from every reader it wraps, and the most readers open at
// once.
type countThrottle struct {
	bytes         atomic.Int64
	mu            sync.Mutex
	open, maxOpen int
}

func (c *countThrottle) wrap(_ context.Context, r io.Reader) io.Reader {
	c.mu.Lock()
	c.open++
	c.maxOpen = max(c.maxOpen, c.open)
	c.mu.Unlock()
	return &countedReader{r: r, c: c}
}

type countedReader struct {
	r    io.Reader
	c    *countThrottle
	done bool
}

func (cr *countedReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.c.bytes.Add(int64(n))
	if err != nil && !cr.done {
		cr.done = true
		cr.c.mu.Lock()
		cr.c.open--
		cr.c.mu.Unlock()
	}
	return n, err
}

// TestCopySegmentThrottlesEveryObject: the copy quota (SegmentFiles.
// Throttle, KIP-956's remote.log.manager.copy.max.bytes.per.second) is
// charged every byte of every data object, from both of the copy's upload
// goroutines: the bytes read through it add up to the sizes the manifest
// records. Held at the .log, the small objects go through the throttle
// beside it, so one limiter is charged by two readers at once.
func TestCopySegmentThrottlesEveryObject(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := &logFirstBucket{gatedBucket: &gatedBucket{Bucket: memory.New(), release: make(chan struct{})}, logEntered: make(chan struct{})}
	m, files, meta := copyRig(t, b)
	th := &countThrottle{}
	files.Throttle = th.wrap
	done := make(chan error, 1)
	var mf *rsm.Manifest
	go func() {
		var err error
		mf, err = m.CopySegment(ctx, meta, files)
		done <- err
	}()
	waitStored(ctx, t, b, 4)
	close(b.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, o := range mf.Objects {
		want += o.Size
	}
	if got := th.bytes.Load(); got != want || want < 8000 {
		t.Fatalf("the throttle was charged %d bytes; the copy's objects hold %d", got, want)
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.maxOpen < 2 {
		t.Fatalf("at most %d throttled readers at once; want the .log's and a small object's", th.maxOpen)
	}
}

// logFirstBucket holds each small object's upload (its throttled reader
// already open) until the .log's upload has begun (its reader open too),
// so that the two goroutines' readers are open at once however the
// goroutines are scheduled.
type logFirstBucket struct {
	*gatedBucket
	logEntered chan struct{}
	once       sync.Once
}

func (b *logFirstBucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.HasSuffix(key, kafkalog.LogSuffix) {
		b.once.Do(func() { close(b.logEntered) })
	} else {
		select {
		case <-b.logEntered:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.gatedBucket.Upload(ctx, key, r, size)
}

// TestCopySegmentFailureEndsThrottledWait: a copy quota wait in one upload
// goroutine ends when the other goroutine's upload fails, so a failed
// copy under a low quota returns without waiting out its bytes.
func TestCopySegmentFailureEndsThrottledWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b := &gatedBucket{Bucket: memory.New(), release: make(chan struct{}), failSuffix: kafkalog.LogSuffix}
	close(b.release) // the .log's upload fails at once
	m, files, meta := copyRig(t, b)
	var waitErr atomic.Value
	files.Throttle = func(wctx context.Context, r io.Reader) io.Reader {
		return readFunc(func(p []byte) (int, error) {
			// A quota with no tokens left: wait until wctx ends (or,
			// should it never, the test's own deadline).
			select {
			case <-wctx.Done():
				waitErr.Store(wctx.Err())
				return 0, wctx.Err()
			case <-ctx.Done():
				waitErr.Store(ctx.Err())
				return 0, ctx.Err()
			}
		})
	}
	_, err := m.CopySegment(ctx, meta, files)
	if err == nil || !strings.Contains(err.Error(), "injected upload failure") {
		t.Fatalf("copy = %v, want the injected .log failure", err)
	}
	if e, _ := waitErr.Load().(error); !errors.Is(e, context.Canceled) {
		t.Fatalf("the throttled wait ended with %v, want context.Canceled", e)
	}
	var left []string
	b.Iter(ctx, "", func(k string) error { left = append(left, k); return nil })
	if len(left) != 0 {
		t.Fatalf("objects left by the failed copy: %v", left)
	}
}

type readFunc func(p []byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

// TestCopySegmentFenceCheckAfterEveryDataObject: the fence check
// (SegmentFiles.BeforeManifest) runs once, after both upload goroutines
// stored every data object and before the manifest; fenced, the copy
// fails with rsm.ErrFenced and leaves no object.
func TestCopySegmentFenceCheckAfterEveryDataObject(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(map[bool]string{false: "allowed", true: "fenced"}[fenced], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b := &gatedBucket{Bucket: memory.New(), release: make(chan struct{})}
			m, files, meta := copyRig(t, b)
			var calls atomic.Int32
			var seen atomic.Value // string: the objects stored when the check ran
			files.BeforeManifest = func(context.Context) error {
				calls.Add(1)
				seen.Store(waitStored(ctx, t, b, 0))
				if fenced {
					return rsm.ErrFenced
				}
				return nil
			}
			done := make(chan error, 1)
			go func() {
				_, err := m.CopySegment(ctx, meta, files)
				done <- err
			}()
			waitStored(ctx, t, b, 4)
			if n := calls.Load(); n != 0 {
				t.Fatal("the fence was checked while the .log's upload was in flight")
			}
			close(b.release)
			err := <-done
			if fenced != errors.Is(err, rsm.ErrFenced) || !fenced && err != nil {
				t.Fatalf("copy = %v (fenced %v)", err, fenced)
			}
			if s, _ := seen.Load().(string); calls.Load() != 1 || s != ".index .leader-epoch-checkpoint .log .timeindex .txnindex" {
				t.Fatalf("fence checked %d times, with %q stored", calls.Load(), s)
			}
			left := waitStored(ctx, t, b, 0)
			if want := map[bool]string{false: ".index .leader-epoch-checkpoint .log .manifest.json .timeindex .txnindex", true: ""}[fenced]; left != want {
				t.Fatalf("stored after the copy: %q, want %q", left, want)
			}
		})
	}
}
