// Package s3 is an rsm.Bucket on Amazon S3 (and S3-compatible stores)
// through aws-sdk-go-v2, with multipart uploads by its transfer manager
// (feature/s3/transfermanager, which aborts a failed multipart upload).
// Additional checksums follow Config.Checksum on every request, uploads
// included.
// Credentials come from the standard AWS chain (environment, shared config
// and credentials files, SSO, web identity, instance or container roles)
// and are never logged.
package s3

import (
	"bytes"
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
	// PartSize is the multipart part size in bytes; objects of at least
	// this size go up in parts. Default 16 MiB; from 5 MiB to 5 GiB (S3's
	// limits).
	PartSize int64 `yaml:"part_size"`
	// PartConcurrency is how many parts upload at once; memory use per
	// upload is at most PartSize x PartConcurrency. Default 2; at most
	// 1024.
	PartConcurrency int `yaml:"part_concurrency"`
	// Checksum is when requests carry additional checksums, for every
	// request of this bucket, uploads included: "when_required" (default)
	// only where the S3 API requires one, so no upload carries an
	// x-amz-checksum-* header, an aws-chunked body or a trailer (which
	// several S3-compatible stores reject) and no GET asks for checksums;
	// "when_supported" a CRC32 on every upload (over TLS in a trailer) and
	// a check of GETs against the stored checksums, the AWS SDK's default.
	// This setting, not AWS_REQUEST_CHECKSUM_CALCULATION or
	// AWS_RESPONSE_CHECKSUM_VALIDATION, applies. tierd's manifests record
	// each object's CRC-32C either way.
	Checksum string `yaml:"checksum"`
	// CAFile is a PEM file of the certificates an https endpoint's
	// certificate must chain to, in place of the system's roots (as the
	// AWS_CA_BUNDLE variable), e.g. a store with a private CA. Default "":
	// the system's roots.
	CAFile string `yaml:"ca_file"`
	// SSE is S3 server-side encryption of every object written
	// (sse.type, sse.kms.key.id, sse.customer.key.file; see rsm.SSE).
	rsm.SSE `yaml:",inline"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Region: "us-east-1", PartSize: 16 << 20, PartConcurrency: 2, Checksum: ChecksumWhenRequired}
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
	if c.PartSize > 5<<30 {
		errs = append(errs, fmt.Errorf("s3: part_size %d above S3's 5 GiB maximum (5368709120 bytes)", c.PartSize))
	}
	if c.PartConcurrency < 1 || c.PartConcurrency > 1024 {
		errs = append(errs, fmt.Errorf("s3: part_concurrency %d is out of range (from 1 to 1024 parts at once)", c.PartConcurrency))
	}
	if c.Checksum != ChecksumWhenRequired && c.Checksum != ChecksumWhenSupported {
		errs = append(errs, fmt.Errorf("s3: checksum %q: want %s or %s", c.Checksum, ChecksumWhenRequired, ChecksumWhenSupported))
	}
	if c.CAFile != "" && strings.HasPrefix(c.Endpoint, "http://") {
		errs = append(errs, fmt.Errorf("s3: ca_file is for https endpoints, not %q", c.Endpoint))
	}
	if err := c.SSE.Validate("s3"); err != nil {
		errs = append(errs, err)
	}
	if c.SSE.Type == rsm.SSEC && strings.HasPrefix(c.Endpoint, "http://") {
		errs = append(errs, fmt.Errorf("s3: sse.type sse-c sends the key with every request: endpoint %s must be https", c.Endpoint))
	}
	return errors.Join(errs...)
}

// Bucket talks to one bucket.
type Bucket struct {
	c   *awss3.Client
	up  *transfermanager.Client
	cfg Config
	sse sse
}

// New loads credentials from the default chain and returns a client. It
// does not contact the server. httpClient may be nil; it cannot be given
// with cfg.CAFile. Errors: an invalid cfg, an unusable ca_file, the AWS
// configuration's.
func New(ctx context.Context, cfg Config, httpClient *http.Client) (*Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(cfg.Region)}
	if httpClient != nil {
		if cfg.CAFile != "" {
			return nil, errors.New("s3: ca_file and an HTTP client of the caller's cannot be combined")
		}
		opts = append(opts, awsconfig.WithHTTPClient(httpClient))
	}
	if cfg.CAFile != "" {
		pem, err := readCAFile(cfg.CAFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, awsconfig.WithCustomCABundle(bytes.NewReader(pem)))
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
		// Every request made with c follows the checksum setting.
		o.RequestChecksumCalculation, o.ResponseChecksumValidation = cfg.checksumModes()
		// With when_supported, ranged GETs (most of tierd's) and objects
		// uploaded in parts cannot be validated; the SDK would print a
		// line to stderr for each, outside tierd's log.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	// The transfer manager does not take the client's setting: left
	// unset, its own RequestChecksumCalculation is WhenSupported and adds
	// CRC32 to PutObject, CreateMultipartUpload and UploadPart (and it
	// applies its value to each of them), so it gets the same one. Its
	// MultipartUploadThreshold (16 MiB by default) follows the part size,
	// so part_size is the size from which uploads go in parts.
	calc, _ := cfg.checksumModes()
	up := transfermanager.New(c, func(o *transfermanager.Options) {
		o.PartSizeBytes = cfg.PartSize
		o.MultipartUploadThreshold = cfg.PartSize
		o.Concurrency = cfg.PartConcurrency
		o.RequestChecksumCalculation = calc
	})
	enc, err := newSSE(cfg.SSE)
	if err != nil {
		return nil, err
	}
	return &Bucket{c: c, up: up, cfg: cfg, sse: enc}, nil
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
	in := &transfermanager.UploadObjectInput{
		Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key), Body: r,
		ContentType: aws.String("application/octet-stream"),
	}
	b.sse.upload(in)
	_, err := b.up.UploadObject(ctx, in)
	return b.sseRefused(err)
}

// GetRange implements rsm.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("%s: negative offset %d", key, off)
	}
	in := &awss3.GetObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key)}
	b.sse.get(in)
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
	hin := &awss3.HeadObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key)}
	b.sse.head(hin)
	out, err := b.c.HeadObject(ctx, hin)
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

// AbortUploadsOfKey implements rsm.MultipartBucket: it lists the uploads
// with the key as prefix (which MinIO answers for an exact key, whether
// or not its process began them), keeps those of exactly key, and aborts
// each by its upload id.
func (b *Bucket) AbortUploadsOfKey(ctx context.Context, key string) (int, error) {
	var ups []types.MultipartUpload
	p := awss3.NewListMultipartUploadsPaginator(b.c, &awss3.ListMultipartUploadsInput{Bucket: aws.String(b.cfg.Bucket), Prefix: aws.String(key)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, err
		}
		for _, u := range page.Uploads {
			if aws.ToString(u.Key) == key {
				ups = append(ups, u)
			}
		}
	}
	for i, u := range ups {
		_, err := b.c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String(b.cfg.Bucket), Key: u.Key, UploadId: u.UploadId})
		if err != nil && !isNotFound(err) {
			var api smithy.APIError
			if !(errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload") {
				return i, err
			}
		}
	}
	return len(ups), nil
}
