package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/tierd/tierd/rsm"
)

// ReadVersioned implements rsm.ConditionalWriter; the version is the ETag
// of the response that carried the bytes.
func (b *Bucket) ReadVersioned(ctx context.Context, key string) ([]byte, rsm.Version, error) {
	in := &awss3.GetObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key)}
	b.sse.get(in)
	out, err := b.c.GetObject(ctx, in)
	if err != nil {
		return nil, "", wrap(key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", key, err)
	}
	return data, rsm.Version(aws.ToString(out.ETag)), nil
}

// PutIfAbsent implements rsm.ConditionalWriter with one PutObject carrying
// "If-None-Match: *" (not the transfer manager: the object is small).
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) (rsm.Version, error) {
	return b.putConditional(ctx, key, data, &awss3.PutObjectInput{IfNoneMatch: aws.String("*")})
}

// PutIfMatch implements rsm.ConditionalWriter with one PutObject carrying
// "If-Match: <etag>".
func (b *Bucket) PutIfMatch(ctx context.Context, key string, data []byte, v rsm.Version) (rsm.Version, error) {
	if v == "" {
		return "", fmt.Errorf("%s: empty version: %w", key, rsm.ErrPreconditionFailed)
	}
	return b.putConditional(ctx, key, data, &awss3.PutObjectInput{IfMatch: aws.String(string(v))})
}

func (b *Bucket) putConditional(ctx context.Context, key string, data []byte, in *awss3.PutObjectInput) (rsm.Version, error) {
	in.Bucket, in.Key, in.Body = aws.String(b.cfg.Bucket), aws.String(key), bytes.NewReader(data)
	in.ContentLength, in.ContentType = aws.Int64(int64(len(data))), aws.String("application/octet-stream")
	b.sse.put(in)
	out, err := b.c.PutObject(ctx, in)
	if err != nil {
		if e := b.sseRefused(err); e != err {
			return "", e
		}
		return "", conditionFailed(key, err)
	}
	return rsm.Version(aws.ToString(out.ETag)), nil
}

// conditionFailed maps S3's answers to a failed condition to
// rsm.ErrPreconditionFailed: 412 PreconditionFailed, 409
// ConditionalRequestConflict (a concurrent conditional write to the same
// key), and 404 NoSuchKey for If-Match on a missing object.
func conditionFailed(key string, err error) error {
	var api smithy.APIError
	var re *awshttp.ResponseError
	status := 0
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	if status == http.StatusPreconditionFailed || isNotFound(err) ||
		(errors.As(err, &api) && (api.ErrorCode() == "PreconditionFailed" || api.ErrorCode() == "ConditionalRequestConflict")) {
		return fmt.Errorf("%s: %w: %w", key, rsm.ErrPreconditionFailed, err)
	}
	return err
}
