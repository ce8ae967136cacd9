package rsm_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	miniogo "github.com/minio/minio-go/v7"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// TestAbortUploadsOf: the incomplete uploads of one copy's keys are
// aborted by their exact keys, seven listings of one key each and no
// listing of a prefix; those of another copy of the partition, of a copy
// of the same id in another partition, and of a key the copy's .log key
// is a prefix of are left. On the filesystem bucket (a crash's temporary
// files) and on MinIO through both S3 clients (uploads started and never
// completed). The cut-off upload a MinIO restart hides from every other
// listing is rsmtest.ExerciseCutOffUpload's (rsm/minio, rsm/s3).
func TestAbortUploadsOf(t *testing.T) {
	ctx := context.Background()
	tp0, tp1 := remotelog.TopicPartition{Topic: "orders", Partition: 0}, remotelog.TopicPartition{Topic: "orders", Partition: 1}
	a := remotelog.SegmentMetadata{TopicPartition: tp0, ID: remotelog.NewSegmentID(), StartOffset: 0}
	bb := remotelog.SegmentMetadata{TopicPartition: tp0, ID: remotelog.NewSegmentID(), StartOffset: 10}
	c := remotelog.SegmentMetadata{TopicPartition: tp1, ID: a.ID, StartOffset: 0}
	check := func(t *testing.T, b rsm.Bucket, start func(key string)) {
		cb := rsmtest.Count(b)
		m, err := rsm.NewManager(cb, rsm.Config{Prefix: "tiered"})
		if err != nil {
			t.Fatal(err)
		}
		aborted := []string{m.Key(a, ".log"), m.Key(a, ".index"), m.Key(a, ".snapshot")}
		kept := []string{m.Key(a, ".log") + ".5", m.Key(bb, ".log"), m.Key(c, ".log")}
		for _, k := range append(append([]string{}, aborted...), kept...) {
			start(k)
		}
		cb.Reset()
		n, err := m.AbortUploadsOf(ctx, a)
		if err != nil || n != len(aborted) {
			t.Fatalf("AbortUploadsOf = %d, %v; want %d uploads", n, err, len(aborted))
		}
		if calls := cb.Calls(); calls["AbortUploadsOfKey"] != 7 || cb.Listings() != 0 {
			t.Errorf("calls %s; want one listing of each of the copy's 7 keys, none of a prefix", cb)
		}
		left, err := b.(rsm.MultipartBucket).IncompleteUploads(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range left { // the filesystem bucket names its temporary files
			if base, id, suffix, ok := rsm.ParseKey(k); ok {
				left[i] = m.Key(remotelog.SegmentMetadata{TopicPartition: partitionOf(k), StartOffset: base, ID: id}, trimTmp(suffix))
			}
		}
		slices.Sort(left)
		slices.Sort(kept)
		if !slices.Equal(left, kept) {
			t.Errorf("uploads left %v, want %v", left, kept)
		}
		if n, err := m.AbortUploadsOf(ctx, a); err != nil || n != 0 {
			t.Errorf("AbortUploadsOf again = %d, %v; want none", n, err)
		}
	}
	t.Run("filesystem", func(t *testing.T) {
		dir := t.TempDir()
		b, err := filesystem.New(filesystem.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		check(t, b, func(key string) {
			p := filepath.Join(dir, filepath.FromSlash(key)) + ".123.tierd-upload" // what a crash mid-Upload leaves
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	})
	buckets, core, _ := s3Buckets(t, "abortkey", false)
	for name, b := range buckets {
		t.Run(name+" on MinIO", func(t *testing.T) {
			check(t, b, func(key string) {
				if _, err := core.NewMultipartUpload(ctx, "abortkey", key, miniogo.PutObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			})
			if err := b.(rsm.MultipartBucket).AbortIncompleteUploads(ctx, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// partitionOf returns the partition of a key of the layout under one
// prefix component.
func partitionOf(key string) remotelog.TopicPartition {
	if filepath.Base(filepath.Dir(key)) == "orders-1" {
		return remotelog.TopicPartition{Topic: "orders", Partition: 1}
	}
	return remotelog.TopicPartition{Topic: "orders", Partition: 0}
}

// trimTmp drops a filesystem bucket's ".<digits>.tierd-upload" from a
// suffix.
func trimTmp(suffix string) string {
	const tmp = ".123.tierd-upload"
	if len(suffix) > len(tmp) && suffix[len(suffix)-len(tmp):] == tmp {
		return suffix[:len(suffix)-len(tmp)]
	}
	return suffix
}
