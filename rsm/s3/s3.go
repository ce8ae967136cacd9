// Package s3 is an rsm.Bucket on Amazon S3 (and S3-compatible stores)
// through aws-sdk-go-v2, with multipart uploads by its transfer manager
// (feature/s3/transfermanager, which aborts a failed multipart upload).
// Credentials come from the standard AWS chain (environment, shared config
// and credentials files, SSO, web identity, instance or container roles)
// and are never logged.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tierd/tierd/rsm"
)

// Config configures the client. Defaults are in DefaultConfig.
type Config struct {
	// Endpoint is the S3 API URL, e.g. "http://127.0.0.1:9000"; empty
	// means AWS's own endpoint for Region. Default "".
	Endpoint string `yaml:"endpoint"`
	// Bucket is the bucket name. Required; it must exist.
	Bucket string `yaml:"bucket"`
	// Region is the bucket's region. Default "us-east-1".
	Region string `yaml:"region"`
	// PathStyle addresses the bucket in the path (MinIO, most
	// S3-compatible stores). Default false.
	PathStyle bool `yaml:"path_style"`
	// PartSize is the multipart part size in bytes. Default 16 MiB;
	// minimum 5 MiB.
	PartSize int64 `yaml:"part_size"`
	// PartConcurrency is how many parts upload at once; memory use per
	// upload is at most PartSize x PartConcurrency. Default 2.
	PartConcurrency int `yaml:"part_concurrency"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Region: "us-east-1", PartSize: 16 << 20, PartConcurrency: 2}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Bucket == "" {
		errs = append(errs, errors.New("s3: bucket is required"))
	}
	if c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "http://") && !strings.HasPrefix(c.Endpoint, "https://") {
		errs = append(errs, fmt.Errorf("s3: endpoint %q must be an http:// or https:// URL", c.Endpoint))
	}
	if c.Region == "" {
		errs = append(errs, errors.New("s3: region is required"))
	}
	if c.PartSize < 5<<20 {
		errs = append(errs, fmt.Errorf("s3: part_size %d below S3's 5 MiB minimum", c.PartSize))
	}
	if c.PartConcurrency < 1 {
		errs = append(errs, errors.New("s3: part_concurrency must be at least 1"))
	}
	return errors.Join(errs...)
}

// Bucket talks to one bucket.
type Bucket struct {
	c   *awss3.Client
	up  *transfermanager.Client
	cfg Config
}

// New loads credentials from the default chain and returns a client. It
// does not contact the server. httpClient may be nil.
func New(ctx context.Context, cfg Config, httpClient *http.Client) (*Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(cfg.Region)}
	if httpClient != nil {
		opts = append(opts, awsconfig.WithHTTPClient(httpClient))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS config: %w", err)
	}
	c := awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	up := transfermanager.New(c, func(o *transfermanager.Options) {
		o.PartSizeBytes = cfg.PartSize
		o.Concurrency = cfg.PartConcurrency
	})
	return &Bucket{c: c, up: up, cfg: cfg}, nil
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var api smithy.APIError
	return errors.As(err, &nsk) || errors.As(err, &nf) ||
		(errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound"))
}

func wrap(key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%s: %w", key, rsm.ErrNotFound)
	}
	return err
}

// Upload implements rsm.Bucket through the transfer manager.
func (b *Bucket) Upload(ctx context.Context, key string, r io.Reader, _ int64) error {
	_, err := b.up.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key), Body: r,
		ContentType: aws.String("application/octet-stream"),
	})
	return err
}

// GetRange implements rsm.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("%s: negative offset %d", key, off)
	}
	in := &awss3.GetObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key)}
	switch {
	case length == 0:
		if _, err := b.Attributes(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+length-1))
	case off > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := b.c.GetObject(ctx, in)
	if err != nil {
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "InvalidRange" {
			return io.NopCloser(strings.NewReader("")), nil // range past the end
		}
		return nil, wrap(key, err)
	}
	return out.Body, nil
}

// Attributes implements rsm.Bucket.
func (b *Bucket) Attributes(ctx context.Context, key string) (rsm.ObjectAttributes, error) {
	out, err := b.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return rsm.ObjectAttributes{}, wrap(key, err)
	}
	return rsm.ObjectAttributes{Size: aws.ToInt64(out.ContentLength)}, nil
}

// Iter implements rsm.Bucket.
func (b *Bucket) Iter(ctx context.Context, prefix string, fn func(string) error) error {
	p := awss3.NewListObjectsV2Paginator(b.c, &awss3.ListObjectsV2Input{Bucket: aws.String(b.cfg.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			if err := fn(aws.ToString(o.Key)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete implements rsm.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	_, err := b.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key)})
	if err != nil && isNotFound(err) {
		return nil
	}
	return err
}

// Name implements rsm.Bucket.
func (b *Bucket) Name() string { return "s3:" + b.cfg.Endpoint + "/" + b.cfg.Bucket }

// Close implements rsm.Bucket.
func (b *Bucket) Close() error { return nil }

// EnsureBucket creates the bucket when it does not exist (for demos and
// tests; production buckets are made by their owners).
func (b *Bucket) EnsureBucket(ctx context.Context) error {
	_, err := b.c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(b.cfg.Bucket)})
	if err == nil {
		return nil
	}
	_, err = b.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(b.cfg.Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("s3: create bucket %s: %w", b.cfg.Bucket, err)
	}
	return nil
}

// IncompleteUploads implements rsm.MultipartBucket.
func (b *Bucket) IncompleteUploads(ctx context.Context, prefix string) ([]string, error) {
	ups, err := b.uploads(ctx, prefix)
	var keys []string
	for _, u := range ups {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys, err
}

// uploads lists the bucket's multipart uploads under prefix. Some
// S3-compatible stores (MinIO) ignore partial prefixes here, so it lists
// them all and filters.
func (b *Bucket) uploads(ctx context.Context, prefix string) ([]types.MultipartUpload, error) {
	var out []types.MultipartUpload
	p := awss3.NewListMultipartUploadsPaginator(b.c, &awss3.ListMultipartUploadsInput{Bucket: aws.String(b.cfg.Bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return out, err
		}
		for _, u := range page.Uploads {
			if strings.HasPrefix(aws.ToString(u.Key), prefix) {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

// AbortIncompleteUploads implements rsm.MultipartBucket.
func (b *Bucket) AbortIncompleteUploads(ctx context.Context, prefix string) error {
	ups, err := b.uploads(ctx, prefix)
	if err != nil {
		return err
	}
	for _, u := range ups {
		_, err := b.c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String(b.cfg.Bucket), Key: u.Key, UploadId: u.UploadId})
		if err != nil && !isNotFound(err) {
			var api smithy.APIError
			if !(errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload") {
				return err
			}
		}
	}
	return nil
}
