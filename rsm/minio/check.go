package minio

import (
	"context"
	"fmt"
	"strings"
	"time"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierd/tierd/rsm"
)

// credentialSource is one place the client looks for credentials, in the
// order New's chain tries them.
type credentialSource struct {
	name     string // where, for messages
	provider credentials.Provider
	network  bool // asks a server (instance metadata): tried last, bounded
}

func credentialSources() []credentialSource {
	return []credentialSource{
		{name: "the environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)", provider: &credentials.EnvAWS{}},
		{name: "the environment (MINIO_ROOT_USER/MINIO_ROOT_PASSWORD or MINIO_ACCESS_KEY/MINIO_SECRET_KEY)", provider: &credentials.EnvMinio{}},
		{name: "the shared credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile AWS_PROFILE or default)", provider: &credentials.FileAWSCredentials{}},
		{name: "IAM (web identity token, container credentials or EC2 instance metadata)", provider: &credentials.IAM{}, network: true},
	}
}

// providers is the credential chain of New.
func providers() []credentials.Provider {
	var ps []credentials.Provider
	for _, s := range credentialSources() {
		ps = append(ps, s.provider)
	}
	return ps
}

// credentialsUsed says where the client's credentials come from: which
// sources it looked in, the first that had some, and its access key id
// (never the secret). anonymous is true when none had any: requests go
// unsigned.
func credentialsUsed() (desc string, anonymous bool) {
	srcs := credentialSources()
	var looked []string
	for _, s := range srcs {
		looked = append(looked, s.name)
	}
	for _, s := range srcs {
		v, ok := retrieve(s)
		if ok {
			return fmt.Sprintf("access key id %q from %s (looked in, in order: %s)", v.AccessKeyID, s.name, strings.Join(looked, "; ")), false
		}
	}
	return "none found; looked in, in order: " + strings.Join(looked, "; "), true
}

// retrieve asks one source, waiting at most 3 s for one on the network.
func retrieve(s credentialSource) (credentials.Value, bool) {
	done := make(chan credentials.Value, 1)
	go func() {
		v, err := s.provider.Retrieve()
		if err != nil {
			v = credentials.Value{}
		}
		done <- v
	}()
	wait := time.Hour
	if s.network {
		wait = 3 * time.Second
	}
	select {
	case v := <-done:
		return v, v.AccessKeyID != "" || v.SecretAccessKey != ""
	case <-time.After(wait):
		return credentials.Value{}, false
	}
}

// Check implements rsm.Checker: it lists at most one key under prefix, a
// GET whose error, unlike a HEAD's, names the problem.
func (b *Bucket) Check(ctx context.Context, prefix string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range b.c.ListObjects(ctx, b.cfg.Bucket, miniogo.ListObjectsOptions{Prefix: prefix, MaxKeys: 1}) {
		if obj.Err != nil {
			return b.explain(obj.Err)
		}
		break
	}
	return nil
}

// explain turns a store's answer that names a configuration problem into
// an *rsm.BucketError; others come back as they are.
func (b *Bucket) explain(err error) error {
	code := miniogo.ToErrorResponse(err).Code
	e := &rsm.BucketError{Bucket: b.Name(), Err: err}
	switch code {
	case "NoSuchBucket":
		e.Problem = fmt.Sprintf("the bucket %q does not exist", b.cfg.Bucket)
		e.Fix = "create it (tierd bucket create --config FILE) or set bucket.minio.bucket to an existing one"
		return e
	case "InvalidAccessKeyId", "InvalidClientTokenId":
		e.Problem = "the store knows no such access key"
		e.Fix = "give tierd an access key the store knows"
	case "SignatureDoesNotMatch":
		e.Problem = "the secret key does not match the access key"
		e.Fix = "give tierd the secret key of that access key"
	case "AccessDenied":
		e.Problem = "access denied"
		e.Fix = "give tierd credentials allowed to list, read, write and delete in the bucket"
	default:
		return err
	}
	desc, anonymous := credentialsUsed()
	if anonymous {
		e.Problem = "no credentials: requests went unsigned and were refused"
		e.Fix = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or another source above) for tierd"
	}
	e.Credentials = desc
	return e
}

// CreateBucket implements rsm.Creator, in the configured region. A
// MinIO still starting (XMinioServerNotInitialized) is asked again for up
// to 30 s.
func (b *Bucket) CreateBucket(ctx context.Context) (bool, error) {
	var ok bool
	err := whileStarting(ctx, func() (err error) { ok, err = b.c.BucketExists(ctx, b.cfg.Bucket); return err })
	if err != nil {
		return false, b.explain(err)
	}
	if ok {
		return false, nil
	}
	err = whileStarting(ctx, func() error {
		return b.c.MakeBucket(ctx, b.cfg.Bucket, miniogo.MakeBucketOptions{Region: b.cfg.Region})
	})
	switch miniogo.ToErrorResponse(err).Code {
	case "":
		return err == nil, err
	case "BucketAlreadyOwnedByYou":
		return false, nil
	case "BucketAlreadyExists":
		return false, &rsm.BucketError{Bucket: b.Name(), Problem: "the bucket name is taken by another account", Err: err,
			Fix: "choose another name for bucket.minio.bucket"}
	}
	return false, b.explain(err)
}

// whileStarting runs fn again, with backoff, while it fails because the
// MinIO server has not finished starting, for at most 30 s.
func whileStarting(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	wait := 100 * time.Millisecond
	for {
		err := fn()
		if miniogo.ToErrorResponse(err).Code != "XMinioServerNotInitialized" || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
