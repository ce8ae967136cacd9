package rsm_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// gatedBucket holds the .log's upload until release is closed (or its
// context ends), and fails the upload of failSuffix (the .log's once
// released).
type gatedBucket struct {
	rsm.Bucket
	release    chan struct{}
	failSuffix string

	mu     sync.Mutex
	logErr error // what the held .log upload returned
}

func (b *gatedBucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	isLog := strings.HasSuffix(key, kafkalog.LogSuffix)
	fail := b.failSuffix != "" && strings.HasSuffix(key, b.failSuffix)
	if fail && !isLog {
		return errors.New("injected upload failure")
	}
	if isLog {
		var err error
		select {
		case <-b.release:
		case <-ctx.Done():
			err = ctx.Err()
		}
		b.mu.Lock()
		b.logErr = err
		b.mu.Unlock()
		if err != nil {
			return err
		}
		if fail {
			return errors.New("injected upload failure")
		}
	}
	return b.Bucket.Upload(ctx, key, r, size)
}

// copyRig writes a small segment's files (a .log, empty indexes, a
// .txnindex) and returns them with their row and a manager over b.
func copyRig(t *testing.T, b rsm.Bucket) (*rsm.Manager, rsm.SegmentFiles, remotelog.SegmentMetadata) {
	m, err := rsm.NewManager(b, rsm.Config{Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := rsm.SegmentFiles{Log: filepath.Join(dir, "00000000000000000000.log"),
		OffsetIndex: filepath.Join(dir, "00000000000000000000.index"), TimeIndex: filepath.Join(dir, "00000000000000000000.timeindex"),
		TxnIndex: filepath.Join(dir, "00000000000000000000.txnindex"), LeaderEpochs: []remotelog.EpochEntry{{Epoch: 0, StartOffset: 0}}}
	for p, d := range map[string][]byte{files.Log: bytes.Repeat([]byte("batches!"), 1000), files.OffsetIndex: nil, files.TimeIndex: nil, files.TxnIndex: nil} {
		if err := os.WriteFile(p, d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return m, files, remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t", Partition: 0}, ID: remotelog.NewSegmentID(),
		StartOffset: 0, EndOffset: 9, SizeInBytes: 8000, State: remotelog.CopySegmentStarted}
}

// TestCopySegmentSmallObjectsBesideLog: the indexes, the transaction index
// and the leader-epoch checkpoint go up while the .log's upload is still
// in flight, and the manifest only after the .log is stored.
func TestCopySegmentSmallObjectsBesideLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := &gatedBucket{Bucket: memory.New(), release: make(chan struct{})}
	m, files, meta := copyRig(t, b)
	type result struct {
		mf  *rsm.Manifest
		err error
	}
	done := make(chan result, 1)
	go func() {
		mf, err := m.CopySegment(ctx, meta, files)
		done <- result{mf, err}
	}()
	// The four small objects are stored while the .log's upload is held.
	if got := waitStored(ctx, t, b, 4); got != ".index .leader-epoch-checkpoint .timeindex .txnindex" {
		t.Fatalf("stored while the .log's upload was held: %q", got)
	}
	close(b.release)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	for _, suffix := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix, kafkalog.TxnIndexSuffix, ".leader-epoch-checkpoint"} {
		o, ok := res.mf.Objects[suffix]
		if !ok || o.CRC32C == "" || o.Key != m.Key(meta, suffix) {
			t.Fatalf("manifest's %s object %+v", suffix, o)
		}
	}
	if err := m.VerifyPresent(ctx, res.mf); err != nil {
		t.Fatal(err)
	}
	back, err := m.ReadManifest(ctx, m.Key(meta, ".manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Objects) != 5 || back.Objects[kafkalog.LogSuffix].Size != 8000 {
		t.Fatalf("stored manifest lists %v", back.Objects)
	}
}

// TestCopySegmentSmallObjectFailureStopsLog: a small object's failed upload
// ends the .log's upload in flight, the copy fails, and none of its objects
// stays in the bucket.
func TestCopySegmentSmallObjectFailureStopsLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := &gatedBucket{Bucket: memory.New(), release: make(chan struct{}), failSuffix: kafkalog.TimeIndexSuffix}
	m, files, meta := copyRig(t, b)
	_, err := m.CopySegment(ctx, meta, files)
	if err == nil || !strings.Contains(err.Error(), "injected upload failure") {
		t.Fatalf("copy = %v, want the injected failure", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the .log's upload was not stopped by the failure")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !errors.Is(b.logErr, context.Canceled) {
		t.Fatalf("held .log upload returned %v, want context.Canceled", b.logErr)
	}
	var left []string
	b.Iter(ctx, "", func(k string) error { left = append(left, k); return nil })
	if len(left) != 0 {
		t.Fatalf("objects left by the failed copy: %v", left)
	}
}

// TestCopySegmentLogFailureCleansSmallObjects: the .log's upload fails
// after the small objects beside it are stored; the copy fails and they
// are deleted.
func TestCopySegmentLogFailureCleansSmallObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := &gatedBucket{Bucket: memory.New(), release: make(chan struct{}), failSuffix: kafkalog.LogSuffix}
	m, files, meta := copyRig(t, b)
	done := make(chan error, 1)
	go func() {
		_, err := m.CopySegment(ctx, meta, files)
		done <- err
	}()
	waitStored(ctx, t, b, 4)
	close(b.release)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "injected upload failure") {
		t.Fatalf("copy = %v, want the injected .log failure", err)
	}
	var left []string
	b.Iter(ctx, "", func(k string) error { left = append(left, k); return nil })
	if len(left) != 0 {
		t.Fatalf("objects left by the failed copy: %v", left)
	}
}

// waitStored waits until the bucket holds n objects and returns their
// suffixes, sorted and joined by spaces.
func waitStored(ctx context.Context, t *testing.T, b rsm.Bucket, n int) string {
	t.Helper()
	for {
		var suffixes []string
		b.Iter(ctx, "", func(k string) error {
			suffixes = append(suffixes, k[strings.Index(k, "."):])
			return nil
		})
		if len(suffixes) >= n {
			slices.Sort(suffixes)
			return strings.Join(suffixes, " ")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d objects stored: %v", len(suffixes), n, suffixes)
		case <-time.After(time.Millisecond):
		}
	}
}
