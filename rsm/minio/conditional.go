package minio

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	miniogo "github.com/minio/minio-go/v7"

	"github.com/tierd/tierd/rsm"
)

// ReadVersioned implements rsm.ConditionalWriter; the version is the ETag
// of the response that carried the bytes.
func (b *Bucket) ReadVersioned(ctx context.Context, key string) ([]byte, rsm.Version, error) {
	obj, err := b.c.GetObject(ctx, b.cfg.Bucket, key, miniogo.GetObjectOptions{ServerSideEncryption: b.get})
	if err != nil {
		return nil, "", notFound(key, err)
	}
	defer obj.Close()
	st, err := obj.Stat() // sends the GET; the body below is this response's
	if err != nil {
		return nil, "", notFound(key, err)
	}
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, "", notFound(key, err)
	}
	return data, rsm.Version(st.ETag), nil
}

// PutIfAbsent implements rsm.ConditionalWriter with a single PUT carrying
// "If-None-Match: *".
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) (rsm.Version, error) {
	opts := miniogo.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true, ServerSideEncryption: b.put}
	opts.SetMatchETagExcept("*")
	return b.putConditional(ctx, key, data, opts)
}

// PutIfMatch implements rsm.ConditionalWriter with a single PUT carrying
// "If-Match: <etag>".
func (b *Bucket) PutIfMatch(ctx context.Context, key string, data []byte, v rsm.Version) (rsm.Version, error) {
	if v == "" {
		return "", fmt.Errorf("%s: empty version: %w", key, rsm.ErrPreconditionFailed)
	}
	opts := miniogo.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true, ServerSideEncryption: b.put}
	opts.SetMatchETag(string(v))
	return b.putConditional(ctx, key, data, opts)
}

func (b *Bucket) putConditional(ctx context.Context, key string, data []byte, opts miniogo.PutObjectOptions) (rsm.Version, error) {
	info, err := b.c.PutObject(ctx, b.cfg.Bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		if e := b.sseRefused(err); e != err {
			return "", e
		}
		return "", conditionFailed(key, err)
	}
	return rsm.Version(info.ETag), nil
}

// conditionFailed maps S3's answers to a failed condition to
// rsm.ErrPreconditionFailed: 412 PreconditionFailed, 409
// ConditionalRequestConflict (a concurrent conditional write to the same
// key), and NoSuchKey for If-Match on a missing object.
func conditionFailed(key string, err error) error {
	r := miniogo.ToErrorResponse(err)
	switch {
	case r.StatusCode == http.StatusPreconditionFailed, r.Code == "PreconditionFailed",
		r.Code == "ConditionalRequestConflict", r.Code == "NoSuchKey":
		return fmt.Errorf("%s: %s: %w", key, r.Code, rsm.ErrPreconditionFailed)
	}
	return err
}
