package rsm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Watch keeps tierd's verdict on the object store: it probes the
// bucket every interval, and soon after any request made through Wrap's
// bucket fails with other than "not found", and says the verdict through
// Err and Ready and the gauge tierd_bucket_up (tierd feeds it to
// /-/ready, the copier's gate and the reads' errors). Its methods are
// safe for concurrent use.
type Watch struct {
	b      Bucket // as configured: the probe uses its Check
	prefix string
	every  time.Duration
	log    *slog.Logger
	up     prometheus.Gauge
	kick   chan struct{}

	mu     sync.Mutex
	probed bool
	err    error // the last probe's failure; nil while the bucket answers
}

// ProbeTimeout bounds one probe of a bucket (Watch.Check), and the
// tools' one check before they work on a bucket.
const ProbeTimeout = 10 * time.Second

// kickGap is the least time between two probes that failed requests ask
// for.
const kickGap = time.Second

// NewWatch returns a watch of bucket b, whose probe asks for a key under
// prefix, every interval every (at least kickGap apart when kicked); it
// logs each change of verdict to log and registers tierd_bucket_up with
// reg (nil: not registered). It probes nothing until Probe or Run.
func NewWatch(b Bucket, prefix string, every time.Duration, log *slog.Logger, reg prometheus.Registerer) *Watch {
	return &Watch{b: b, prefix: prefix, every: every, log: log, kick: make(chan struct{}, 1),
		up: promauto.With(reg).NewGauge(prometheus.GaugeOpts{
			Name: "tierd_bucket_up",
			Help: "1 when the last probe of the object store succeeded, 0 when it failed (see /-/ready for why).",
		})}
}

// Probe asks the bucket once (see Check), records the verdict, logs a
// change, and returns the failure as Err does. A probe cut short by ctx's
// end records nothing and returns ctx's error.
func (w *Watch) Probe(ctx context.Context) error {
	err := w.Check(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	w.set(err)
	return w.Err()
}

// Check is one probe, recording nothing: Checker's Check when the bucket
// has one, else the attributes of a probe key under the prefix, whose
// absence is fine (nil). It gives up after ProbeTimeout (10s).
func (w *Watch) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	if c, ok := w.b.(Checker); ok {
		return c.Check(ctx, w.prefix)
	}
	_, err := w.b.Attributes(ctx, path.Join(w.prefix, "_tierd_probe"))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func (w *Watch) set(err error) {
	w.mu.Lock()
	first, was := !w.probed, w.err
	w.probed, w.err = true, err
	w.mu.Unlock()
	if err == nil {
		w.up.Set(1)
		if first || was != nil {
			w.log.Info("object store reachable", "bucket", w.b.Name())
		}
		return
	}
	w.up.Set(0)
	if first || was == nil || was.Error() != err.Error() {
		msg := "object store unreachable: not ready, copies wait, reads fail; probing every interval"
		if errors.Is(err, ErrMisconfigured) {
			msg = "object store refuses tierd: not ready, copies wait, reads fail; probing every interval"
		}
		w.log.Error(msg, "err", w.Err(), "interval", w.every)
	}
}

// Run probes every interval and on Kick (within kickGap of the last
// probe) until ctx ends.
func (w *Watch) Run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	last := time.Now()
	var soon <-chan time.Time // a kick's probe, put off to kickGap after the last
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-soon:
		case <-w.kick:
			if d := kickGap - time.Since(last); d > 0 {
				if soon == nil {
					soon = time.After(d)
				}
				continue
			}
		}
		soon = nil
		w.Probe(ctx)
		last = time.Now()
	}
}

// Kick asks Run for a probe soon.
func (w *Watch) Kick() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Err returns nil unless the last probe failed, else its failure naming
// the bucket. Before the first probe it is nil: nothing says the store is
// down.
func (w *Watch) Err() error {
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	var be *BucketError
	if err == nil || errors.As(err, &be) {
		return err // a BucketError names the bucket
	}
	return fmt.Errorf("%s: %w", w.b.Name(), err)
}

// Ready says whether the last probe succeeded, and why not.
func (w *Watch) Ready() (bool, string) {
	w.mu.Lock()
	probed := w.probed
	w.mu.Unlock()
	if !probed {
		return false, "object store not probed yet"
	}
	if err := w.Err(); err != nil {
		return false, "object store unreachable: " + err.Error()
	}
	return true, ""
}

// Wrap returns b with every failed request (other than not found, a
// failed condition or a cancelled call) kicking a probe. The result
// implements MultipartBucket and Checker whether or not b does (as a
// bucket without incomplete uploads, and without a check).
func (w *Watch) Wrap(b Bucket) Bucket { return &watchedBucket{Bucket: b, w: w} }

// watchedBucket is a bucket whose failed requests kick its watch. It
// implements MultipartBucket as the wrapped bucket does, or as a
// bucket without incomplete uploads.
type watchedBucket struct {
	Bucket
	w *Watch
}

func (b *watchedBucket) note(err error) error {
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrPreconditionFailed) && !errors.Is(err, context.Canceled) {
		b.w.Kick()
	}
	return err
}

func (b *watchedBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	r, err := b.Bucket.GetRange(ctx, key, off, length)
	return r, b.note(err)
}

func (b *watchedBucket) Attributes(ctx context.Context, key string) (ObjectAttributes, error) {
	a, err := b.Bucket.Attributes(ctx, key)
	return a, b.note(err)
}

func (b *watchedBucket) Iter(ctx context.Context, prefix string, fn func(key string) error) error {
	return b.note(b.Bucket.Iter(ctx, prefix, fn))
}

func (b *watchedBucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	return b.note(b.Bucket.Upload(ctx, key, r, size))
}

func (b *watchedBucket) Delete(ctx context.Context, key string) error {
	return b.note(b.Bucket.Delete(ctx, key))
}

func (b *watchedBucket) ReadVersioned(ctx context.Context, key string) ([]byte, Version, error) {
	data, v, err := b.Bucket.ReadVersioned(ctx, key)
	return data, v, b.note(err)
}

func (b *watchedBucket) PutIfAbsent(ctx context.Context, key string, data []byte) (Version, error) {
	v, err := b.Bucket.PutIfAbsent(ctx, key, data)
	return v, b.note(err)
}

func (b *watchedBucket) PutIfMatch(ctx context.Context, key string, data []byte, prev Version) (Version, error) {
	v, err := b.Bucket.PutIfMatch(ctx, key, data, prev)
	return v, b.note(err)
}

// IncompleteUploads implements MultipartBucket.
func (b *watchedBucket) IncompleteUploads(ctx context.Context, prefix string) ([]string, error) {
	if mb, ok := b.Bucket.(MultipartBucket); ok {
		keys, err := mb.IncompleteUploads(ctx, prefix)
		return keys, b.note(err)
	}
	return nil, nil
}

// AbortIncompleteUploads implements MultipartBucket.
func (b *watchedBucket) AbortIncompleteUploads(ctx context.Context, prefix string) error {
	if mb, ok := b.Bucket.(MultipartBucket); ok {
		return b.note(mb.AbortIncompleteUploads(ctx, prefix))
	}
	return nil
}

// AbortUploadsOfKey implements MultipartBucket.
func (b *watchedBucket) AbortUploadsOfKey(ctx context.Context, key string) (int, error) {
	if mb, ok := b.Bucket.(MultipartBucket); ok {
		n, err := mb.AbortUploadsOfKey(ctx, key)
		return n, b.note(err)
	}
	return 0, nil
}

// Check implements Checker as the wrapped bucket does (nil when it
// has no check), so that Manager.CheckStore reaches it.
func (b *watchedBucket) Check(ctx context.Context, prefix string) error {
	if c, ok := b.Bucket.(Checker); ok {
		return b.note(c.Check(ctx, prefix))
	}
	return nil
}
