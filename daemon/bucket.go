package daemon

import (
	"context"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/s3"
)

// OpenBucket builds the configured bucket.
func OpenBucket(ctx context.Context, c config.Bucket) (rsm.Bucket, error) {
	switch c.Type {
	case "minio":
		return minio.New(c.MinIO, nil)
	case "s3":
		return s3.New(ctx, c.S3, nil)
	}
	return filesystem.Open(c.Filesystem) // never creates it: see "tierd bucket create"
}
