package daemon

import (
	"context"
	"fmt"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
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

// ManagerConfig is the rsm.Config of the copies under prefix: the form
// new copies take (objects:) and, when objects.encryption.keys lists any,
// the keyring of those KEKs, read from their files (chunked.LoadKeyring:
// each file tierd's own and not readable by group or other users).
// Errors: a key file's, naming the key id and its path, never its bytes.
func ManagerConfig(o config.Objects, prefix string) (rsm.Config, error) {
	rc := rsm.Config{Prefix: prefix, Objects: o.Config}
	if len(o.EncryptionKeys) == 0 {
		return rc, nil
	}
	kr, err := chunked.LoadKeyring(o.EncryptionKeys, o.CurrentKeyID())
	if err != nil {
		return rc, fmt.Errorf("objects: %w", err)
	}
	rc.Keys = kr
	return rc, nil
}
