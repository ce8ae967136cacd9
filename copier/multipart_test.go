package copier

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/rsm/s3"
)

// multipartBucket is a bucket that lists and aborts multipart uploads.
type multipartBucket interface {
	rsm.Bucket
	rsm.MultipartBucket
}

// midPartBucket is an S3 bucket whose .timeindex upload fails once,
// after the .log's upload beside it has read more than failAfter bytes
// (so the .log is a multipart upload in flight when it fails).
type midPartBucket struct {
	multipartBucket
	failAfter int64
	failed    atomic.Bool
	logRead   atomic.Int64
	logErr    atomic.Value // error: what the .log's upload returned
}

type countRead struct {
	r io.Reader
	n *atomic.Int64
}

func (c countRead) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (b *midPartBucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	switch {
	case strings.HasSuffix(key, ".log") && !b.failed.Load():
		err := b.multipartBucket.Upload(ctx, key, countRead{r, &b.logRead}, size)
		b.logErr.Store(errOrNil{err})
		return err
	case strings.HasSuffix(key, ".timeindex") && !b.failed.Load():
		for b.logRead.Load() <= b.failAfter {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		b.failed.Store(true)
		return errors.New("injected: 503 SlowDown")
	}
	return b.multipartBucket.Upload(ctx, key, r, size)
}

type errOrNil struct{ err error }

// TestSmallObjectFailureMidMultipartLeavesNothing: on MinIO, through
// both S3 clients, a small object's upload fails while the .log beside it
// is a multipart upload in flight. The copy fails, the .log's upload is
// stopped, and once Sync returns neither an object nor an incomplete
// multipart upload of the attempt is left; the local segment stays and the
// next pass copies it.
func TestSmallObjectFailureMidMultipartLeavesNothing(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	for _, client := range []string{"minio", "s3"} {
		t.Run(client, func(t *testing.T) {
			name := "midpart-" + client
			srv.CreateBucket(t, name)
			var mb multipartBucket
			var err error
			if client == "minio" {
				mc := minio.DefaultConfig()
				mc.Endpoint, mc.Bucket, mc.Insecure, mc.PartSize, mc.PartConcurrency = srv.Endpoint, name, true, 5<<20, 1
				mb, err = minio.New(mc, nil)
			} else {
				sc := s3.DefaultConfig()
				sc.Endpoint, sc.Bucket, sc.PathStyle, sc.PartSize, sc.PartConcurrency = "http://"+srv.Endpoint, name, true, 5<<20, 1
				mb, err = s3.New(context.Background(), sc, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			midPartFailure(t, mb)
		})
	}
}

func midPartFailure(t *testing.T, mb multipartBucket) {
	b := &midPartBucket{multipartBucket: mb, failAfter: 6 << 20}
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.LocalRetentionMs = ptr(0)
	r := newRig(t, cfg, b)
	old := r.now.UnixMilli() - 3_600_000
	size := writeSegment(t, r.dir(), 0, seq(0, 16), same(old, 16), 1<<20)
	writeSegment(t, r.dir(), 16, nil, nil, 0)
	if _, err := r.c.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "SlowDown") {
		t.Fatalf("sync = %v, want the injected failure", err)
	}
	// The .log's upload was stopped mid-multipart (the AWS SDK's own
	// abort of it then fails too, under the cancelled context).
	if le, _ := b.logErr.Load().(errOrNil); le.err == nil || !strings.Contains(le.err.Error(), "context canceled") || b.logRead.Load() >= size {
		t.Fatalf("the .log's upload returned %v after %d of %d bytes, want it stopped by the cancel", le.err, b.logRead.Load(), size)
	}
	if !reflect.DeepEqual(r.localBases(), []int64{0, 16}) {
		t.Fatalf("uncopied segments deleted: %v", r.localBases())
	}
	if st := r.states(); st[remotelog.DeleteSegmentFinished] != 1 || st[remotelog.CopySegmentFinished] != 0 {
		t.Fatalf("states after failure %v", st)
	}
	if objs := r.objects(); len(objs) != 0 {
		t.Fatalf("failed copy left objects %v", objs)
	}
	ups, err := mb.IncompleteUploads(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 0 {
		t.Fatalf("failed copy left incomplete multipart uploads %v", ups)
	}
	r.sync()
	if st := r.states(); st[remotelog.CopySegmentFinished] != 1 {
		t.Fatalf("after retry: states %v", st)
	}
	if !reflect.DeepEqual(r.localBases(), []int64{16}) {
		t.Fatalf("local after retry: %v", r.localBases())
	}
}
