// Package minio is an rsm.Bucket on MinIO and other S3-compatible stores,
// through minio-go. Credentials come from the environment
// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, MINIO_ROOT_USER/
// MINIO_ROOT_PASSWORD), ~/.aws/credentials or instance metadata, and are
// never logged.
//
// minio-go, as configured here (its TrailingHeaders option off), adds no
// additional checksum header (x-amz-checksum-*, Content-MD5) and no
// trailer to any request, which S3-compatible stores that reject them
// need; rsm/minio's tests check it. Over plain HTTP its uploads are
// aws-chunked with per-chunk SigV4 signatures
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD, no trailer); over TLS they are
// plain bodies (UNSIGNED-PAYLOAD).
package minio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/encrypt"

	"github.com/tierd/tierd/rsm"
)

// Config configures the client. Defaults are in DefaultConfig.
type Config struct {
	// Endpoint is the S3 API's URL, e.g. "http://127.0.0.1:9000" (plain
	// HTTP) or "https://minio.example:9000" (TLS), as bucket.s3 takes it.
	// The older form host:port, with Insecure for plain HTTP, is still
	// taken. Required.
	Endpoint string `yaml:"endpoint"`
	// Bucket is the bucket name. Required; it must exist.
	Bucket string `yaml:"bucket"`
	// Region is the bucket's region. Default "us-east-1".
	Region string `yaml:"region"`
	// Insecure uses plain HTTP with a host:port Endpoint. Not read from
	// tierd.yaml, where an http:// endpoint says it (the old key is
	// converted by tierd's config loader). Default false.
	Insecure bool `yaml:"-"`
	// PathStyle addresses the bucket in the path, not the host name (what
	// MinIO expects). Default true.
	PathStyle bool `yaml:"path_style"`
	// PartSize is the multipart part size in bytes; objects larger than
	// this go up in parts. Default 16 MiB; from 5 MiB to 5 GiB (S3's
	// limits).
	PartSize uint64 `yaml:"part_size"`
	// PartConcurrency is how many parts upload at once; memory use per
	// upload is PartSize x PartConcurrency. Default 2; at most 1024.
	PartConcurrency uint `yaml:"part_concurrency"`
	// MaxRetries is how many times minio-go retries a failed request
	// (5xx, throttling, network errors) with backoff. Default 10.
	MaxRetries int `yaml:"max_retries"`
	// CAFile is a PEM file of the certificates the endpoint's certificate
	// must chain to, in place of the system's roots, e.g. a store with a
	// private CA. Default "": the system's roots.
	CAFile string `yaml:"ca_file"`
	// SSE is S3 server-side encryption of every object written
	// (sse.type, sse.kms.key.id, sse.customer.key.file; see rsm.SSE).
	rsm.SSE `yaml:",inline"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Region: "us-east-1", PathStyle: true, PartSize: 16 << 20, PartConcurrency: 2, MaxRetries: 10}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	host, secure, err := c.target()
	if err != nil {
		errs = append(errs, err)
	}
	if c.Bucket == "" {
		errs = append(errs, errors.New("minio: bucket is required"))
	}
	if c.PartSize < 5<<20 {
		errs = append(errs, fmt.Errorf("minio: part_size %d below S3's 5 MiB minimum", c.PartSize))
	}
	if c.MaxRetries < 1 {
		errs = append(errs, errors.New("minio: max_retries must be at least 1"))
	}
	if c.PartSize > 5<<30 {
		errs = append(errs, fmt.Errorf("minio: part_size %d above S3's 5 GiB maximum (5368709120 bytes)", c.PartSize))
	}
	if c.PartConcurrency == 0 || c.PartConcurrency > 1024 {
		errs = append(errs, fmt.Errorf("minio: part_concurrency %d is out of range (from 1 to 1024 parts at once)", c.PartConcurrency))
	}
	if c.CAFile != "" && host != "" && !secure {
		errs = append(errs, fmt.Errorf("minio: ca_file is for TLS; endpoint %s is plain http", c.Endpoint))
	}
	if err := c.SSE.Validate("minio"); err != nil {
		errs = append(errs, err)
	}
	if c.SSE.Type == rsm.SSEC && host != "" && !secure {
		errs = append(errs, fmt.Errorf("minio: sse.type sse-c sends the key with every request: endpoint %s must be https", c.Endpoint))
	}
	return errors.Join(errs...)
}

// Bucket talks to one bucket.
type Bucket struct {
	c   *miniogo.Client
	cfg Config
	// put is the server-side encryption of writes, get of reads (sse-c
	// only: the others need nothing on reads); nil for none.
	put, get encrypt.ServerSide
}

// New returns a client for cfg. It does not contact the server. transport
// may be nil; it cannot be given with cfg.CAFile. Errors: an invalid cfg,
// an unusable ca_file, minio-go's.
func New(cfg Config, transport http.RoundTripper) (*Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CAFile != "" {
		if transport != nil {
			return nil, errors.New("minio: ca_file and a transport of the caller's cannot be combined")
		}
		var err error
		if transport, err = caTransport(cfg.CAFile); err != nil {
			return nil, err
		}
	}
	creds := credentials.NewChainCredentials(providers())
	lookup := miniogo.BucketLookupAuto
	if cfg.PathStyle {
		lookup = miniogo.BucketLookupPath
	}
	host, secure, _ := cfg.target()
	c, err := miniogo.New(host, &miniogo.Options{
		Creds: creds, Secure: secure, Region: cfg.Region, BucketLookup: lookup, Transport: transport,
		MaxRetries: cfg.MaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("minio client: %w", err)
	}
	b := &Bucket{c: c, cfg: cfg}
	switch cfg.SSE.Type {
	case rsm.SSES3:
		b.put = encrypt.NewSSE()
	case rsm.SSEKMS:
		if b.put, err = encrypt.NewSSEKMS(cfg.SSE.KMSKeyID, nil); err != nil {
			return nil, fmt.Errorf("minio: %w", err)
		}
	case rsm.SSEC:
		key, err := cfg.SSE.CustomerKey()
		if err != nil {
			return nil, fmt.Errorf("minio: %w", err)
		}
		b.put, err = encrypt.NewSSEC(key)
		clear(key)
		if err != nil {
			return nil, fmt.Errorf("minio: %w", err)
		}
		b.get = b.put
	}
	return b, nil
}

// sseRefused names server-side encryption in a write's error when the
// store refused it.
func (b *Bucket) sseRefused(err error) error {
	if b.put == nil || err == nil {
		return err
	}
	r := miniogo.ToErrorResponse(err)
	switch {
	case r.Code == "NotImplemented", r.Code == "InvalidRequest", r.Code == "InvalidArgument", r.Code == "InvalidEncryptionMethod",
		r.Code == "InvalidEncryptionAlgorithmError", r.Code == "KMSNotConfigured", r.Code == "KMS.NotFoundException",
		r.Code == "KMSKeyNotFoundException", r.Code == "AccessDenied" && strings.Contains(strings.ToLower(r.Message), "kms"),
		strings.HasPrefix(r.Code, "XMinioKMS"), strings.Contains(r.Code, "SSE"), strings.Contains(r.Message, "encryption"):
		return rsm.SSERefused(b.Name(), b.cfg.SSE.Type, r.Code, err)
	}
	return err
}

func notFound(key string, err error) error {
	if miniogo.ToErrorResponse(err).Code == "NoSuchKey" {
		return fmt.Errorf("%s: %w", key, rsm.ErrNotFound)
	}
	return err
}

// Upload implements rsm.Bucket. minio-go aborts a failed multipart upload.
func (b *Bucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	_, err := b.c.PutObject(ctx, b.cfg.Bucket, key, r, size, miniogo.PutObjectOptions{
		PartSize: b.cfg.PartSize, NumThreads: b.cfg.PartConcurrency, ContentType: "application/octet-stream",
		ServerSideEncryption: b.put,
	})
	return b.sseRefused(err)
}

// GetRange implements rsm.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("%s: negative offset %d", key, off)
	}
	if length == 0 {
		if _, err := b.Attributes(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	opts := miniogo.GetObjectOptions{ServerSideEncryption: b.get}
	var err error
	switch {
	case length > 0:
		err = opts.SetRange(off, off+length-1)
	case off > 0:
		err = opts.SetRange(off, 0)
	}
	if err != nil {
		return nil, err
	}
	// GetObject is lazy; the first Read sends the request. Do it now so
	// that a missing key is reported here. The request has a context of
	// its own, which Close cancels: minio-go's Object.Close waits for a
	// Read in flight, and only the request's end ends a Read that waits
	// on a store that stopped sending.
	gctx, cancel := context.WithCancel(ctx)
	obj, err := b.c.GetObject(gctx, b.cfg.Bucket, key, opts)
	if err != nil {
		cancel()
		return nil, notFound(key, err)
	}
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		cancel()
		if miniogo.ToErrorResponse(err).Code == "InvalidRange" {
			return io.NopCloser(strings.NewReader("")), nil // range past the end
		}
		return nil, notFound(key, err)
	}
	return &objectBody{Object: obj, cancel: cancel}, nil
}

// objectBody is a GetRange body: Close ends the request first (and so a
// Read waiting on it), then closes the object.
type objectBody struct {
	*miniogo.Object
	cancel context.CancelFunc
}

// Close implements io.Closer.
func (o *objectBody) Close() error {
	o.cancel()
	return o.Object.Close()
}

// Attributes implements rsm.Bucket.
func (b *Bucket) Attributes(ctx context.Context, key string) (rsm.ObjectAttributes, error) {
	st, err := b.c.StatObject(ctx, b.cfg.Bucket, key, miniogo.StatObjectOptions{ServerSideEncryption: b.get})
	if err != nil {
		return rsm.ObjectAttributes{}, notFound(key, err)
	}
	return rsm.ObjectAttributes{Size: st.Size}, nil
}

// Iter implements rsm.Bucket.
func (b *Bucket) Iter(ctx context.Context, prefix string, fn func(string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range b.c.ListObjects(ctx, b.cfg.Bucket, miniogo.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return obj.Err
		}
		if err := fn(obj.Key); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Delete implements rsm.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	err := b.c.RemoveObject(ctx, b.cfg.Bucket, key, miniogo.RemoveObjectOptions{})
	if err != nil && errors.Is(notFound(key, err), rsm.ErrNotFound) {
		return nil
	}
	return err
}

// Name implements rsm.Bucket.
func (b *Bucket) Name() string { return "minio:" + b.cfg.Endpoint + "/" + b.cfg.Bucket }

// Close implements rsm.Bucket.
func (b *Bucket) Close() error { return nil }

// IncompleteUploads implements rsm.MultipartBucket. MinIO lists uploads
// only for an exact key or for the whole bucket, not for a key prefix, so
// this lists the bucket's uploads and filters them.
func (b *Bucket) IncompleteUploads(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for u := range b.c.ListIncompleteUploads(ctx, b.cfg.Bucket, "", true) {
		if u.Err != nil {
			return keys, u.Err
		}
		if strings.HasPrefix(u.Key, prefix) {
			keys = append(keys, u.Key)
		}
	}
	return keys, nil
}

// AbortIncompleteUploads implements rsm.MultipartBucket.
func (b *Bucket) AbortIncompleteUploads(ctx context.Context, prefix string) error {
	keys, err := b.IncompleteUploads(ctx, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := b.c.RemoveIncompleteUpload(ctx, b.cfg.Bucket, k); err != nil {
			return err
		}
	}
	return nil
}

// AbortUploadsOfKey implements rsm.MultipartBucket: MinIO lists the
// uploads of an exact key (ListMultipartUploads with the key as prefix)
// whether or not its process began them, and each is aborted by its
// upload id.
func (b *Bucket) AbortUploadsOfKey(ctx context.Context, key string) (int, error) {
	var ids []string
	for u := range b.c.ListIncompleteUploads(ctx, b.cfg.Bucket, key, true) {
		if u.Err != nil {
			return 0, u.Err
		}
		if u.Key == key {
			ids = append(ids, u.UploadID)
		}
	}
	core := miniogo.Core{Client: b.c}
	for i, id := range ids {
		err := core.AbortMultipartUpload(ctx, b.cfg.Bucket, key, id)
		if err != nil && miniogo.ToErrorResponse(err).Code != "NoSuchUpload" {
			return i, err
		}
	}
	return len(ids), nil
}
