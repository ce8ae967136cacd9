package rsm

import (
	"errors"
	"fmt"

	"github.com/tierd/tierd/rsm/chunked"
)

// Server-side encryption types (SSE.Type), as S3 names them.
const (
	SSENone = ""        // nothing asked: the bucket's default encryption, if any, applies
	SSES3   = "sse-s3"  // keys the store manages (x-amz-server-side-encryption: AES256)
	SSEKMS  = "sse-kms" // a key of the store's KMS (aws:kms, with SSE.KMSKeyID)
	SSEC    = "sse-c"   // a key tierd sends with every request (SSE.CustomerKeyFile)
)

// SSE is S3 server-side encryption of every object a minio or s3 bucket
// writes (the store encrypts what it holds at rest; what tierd sends and
// reads is plaintext, unlike objects.encryption). With sse-c the store
// keeps no key: every read and write sends it, TLS is required, and an
// object written under one key reads under no other. Defaults: none.
type SSE struct {
	// Type is "" (none; default), "sse-s3", "sse-kms" or "sse-c".
	Type string `yaml:"sse.type"`
	// KMSKeyID is the KMS key id or ARN of sse-kms; "" uses the store's
	// default key (AWS's aws/s3 key; MinIO's MINIO_KMS_* default key).
	// Default "".
	KMSKeyID string `yaml:"sse.kms.key.id"`
	// CustomerKeyFile holds sse-c's AES-256 key: 32 bytes, or 64 hex
	// digits ("tierd keys new FILE" makes one); tierd's own, not readable
	// by group or other users. Required with sse-c. Default "".
	CustomerKeyFile string `yaml:"sse.customer.key.file"`
}

// Validate checks the type and that each setting goes with it; what
// names the section in errors ("minio", "s3").
func (s SSE) Validate(what string) error {
	var errs []error
	switch s.Type {
	case SSENone, SSES3, SSEKMS, SSEC:
	default:
		errs = append(errs, fmt.Errorf("%s: sse.type %q: must be sse-s3, sse-kms, sse-c or empty", what, s.Type))
	}
	if s.KMSKeyID != "" && s.Type != SSEKMS {
		errs = append(errs, fmt.Errorf("%s: sse.kms.key.id is for sse.type sse-kms", what))
	}
	if s.CustomerKeyFile != "" && s.Type != SSEC {
		errs = append(errs, fmt.Errorf("%s: sse.customer.key.file is for sse.type sse-c", what))
	}
	if s.Type == SSEC && s.CustomerKeyFile == "" {
		errs = append(errs, fmt.Errorf("%s: sse.type sse-c needs sse.customer.key.file", what))
	}
	return errors.Join(errs...)
}

// CustomerKey reads sse-c's key (chunked.ReadKeyFile); nil without sse-c.
func (s SSE) CustomerKey() ([]byte, error) {
	if s.Type != SSEC {
		return nil, nil
	}
	return chunked.ReadKeyFile("sse.customer.key.file", s.CustomerKeyFile)
}

// SSERefused builds the error of a write the store refused because of
// its server-side encryption: what it asked, the store's answer, and
// what to check.
func SSERefused(bucket, typ, code string, err error) error {
	fix := "check that the store supports it"
	switch typ {
	case SSES3, SSEKMS:
		fix = "the store needs a KMS for it (MinIO: MINIO_KMS_* settings; AWS: the key's policy must let tierd's role use it)"
	case SSEC:
		fix = "sse-c needs an https endpoint and a store that takes customer keys"
	}
	return fmt.Errorf("%s refused server-side encryption %s (sse.type) with %s: %s: %w", bucket, typ, code, fix, err)
}
