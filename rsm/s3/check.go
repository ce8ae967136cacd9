package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tierd/tierd/rsm"
)

// lookedIn lists the AWS SDK's credential sources in the order it tries
// them.
const lookedIn = "looked in, in order: the environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY); " +
	"the shared config and credentials files (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE or ~/.aws/config, ~/.aws/credentials; profile AWS_PROFILE or default); " +
	"web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN); container credentials (AWS_CONTAINER_CREDENTIALS_*); EC2 instance metadata"

// Check implements rsm.Checker: it lists at most one key under prefix (a
// GET whose error, unlike a HEAD's, names the problem).
func (b *Bucket) Check(ctx context.Context, prefix string) error {
	_, err := b.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(b.cfg.Bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(1)})
	if err != nil {
		return b.explain(ctx, err)
	}
	return nil
}

// explain turns an answer that names a configuration problem into an
// *rsm.BucketError; others come back as they are.
func (b *Bucket) explain(ctx context.Context, err error) error {
	e := &rsm.BucketError{Bucket: b.Name(), Err: err}
	var api smithy.APIError
	var nsb *types.NoSuchBucket
	code := ""
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	switch {
	case errors.As(err, &nsb) || code == "NoSuchBucket":
		e.Problem = fmt.Sprintf("the bucket %q does not exist", b.cfg.Bucket)
		e.Fix = "create it (tierd bucket create --config FILE) or set bucket.s3.bucket to an existing one"
		return e
	case code == "InvalidAccessKeyId" || code == "InvalidClientTokenId":
		e.Problem = "the store knows no such access key"
		e.Fix = "give tierd an access key the store knows"
	case code == "SignatureDoesNotMatch":
		e.Problem = "the secret key does not match the access key"
		e.Fix = "give tierd the secret key of that access key"
	case code == "AccessDenied" || code == "Forbidden":
		e.Problem = "access denied"
		e.Fix = "give tierd credentials allowed to list, read, write and delete in the bucket"
	default:
		if cerr := b.credentialsError(ctx); cerr != nil {
			return cerr // the SDK found no credentials, so sent nothing
		}
		return err
	}
	creds, cerr := b.c.Options().Credentials.Retrieve(ctx)
	if cerr != nil {
		e.Credentials = "none found (" + cerr.Error() + "); " + lookedIn
	} else {
		e.Credentials = fmt.Sprintf("access key id %q from %s; %s", creds.AccessKeyID, sourceName(creds.Source), lookedIn)
	}
	return e
}

// credentialsError returns an *rsm.BucketError when the SDK's chain finds
// no credentials, nil when it does.
func (b *Bucket) credentialsError(ctx context.Context) error {
	if b.c.Options().Credentials == nil {
		return nil
	}
	if _, err := b.c.Options().Credentials.Retrieve(ctx); err != nil && ctx.Err() == nil {
		return &rsm.BucketError{Bucket: b.Name(), Problem: "no credentials", Err: err, Credentials: "none found; " + lookedIn,
			Fix: "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or another source above) for tierd"}
	}
	return nil
}

// CreateBucket implements rsm.Creator, in the configured region.
func (b *Bucket) CreateBucket(ctx context.Context) (bool, error) {
	if _, err := b.c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(b.cfg.Bucket)}); err == nil {
		return false, nil
	}
	in := &awss3.CreateBucketInput{Bucket: aws.String(b.cfg.Bucket)}
	if b.cfg.Region != "us-east-1" {
		// S3 wants the region named, except its first one.
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(b.cfg.Region)}
	}
	_, err := b.c.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	var taken *types.BucketAlreadyExists
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &owned):
		return false, nil
	case errors.As(err, &taken):
		return false, &rsm.BucketError{Bucket: b.Name(), Problem: "the bucket name is taken by another account", Err: err,
			Fix: "choose another name for bucket.s3.bucket"}
	}
	return false, b.explain(ctx, err)
}

// sourceName says in words which source the SDK's Credentials.Source
// names (its provider names, e.g. "EnvConfigCredentials").
func sourceName(src string) string {
	switch {
	case src == "EnvConfigCredentials":
		return "the environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
	case strings.HasPrefix(src, "SharedConfigCredentials"):
		return "the shared credentials file (" + strings.TrimSpace(strings.TrimPrefix(src, "SharedConfigCredentials:")) + ")"
	case src == "EC2RoleProvider":
		return "EC2 instance metadata"
	case src == "WebIdentityCredentials":
		return "web identity (AWS_WEB_IDENTITY_TOKEN_FILE)"
	case src == "CredentialsEndpointProvider":
		return "container credentials"
	}
	return src
}
