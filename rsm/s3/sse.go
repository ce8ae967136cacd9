package s3

import (
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tierd/tierd/rsm"
)

// sse is the server-side encryption a Bucket asks for (Config.SSE).
type sse struct {
	typ      string
	kmsKeyID *string
	// sse-c: the key and its MD5, base64, sent with every request.
	cKey, cMD5 *string
}

func newSSE(c rsm.SSE) (sse, error) {
	s := sse{typ: c.Type}
	if c.KMSKeyID != "" {
		s.kmsKeyID = aws.String(c.KMSKeyID)
	}
	if c.Type == rsm.SSEC {
		key, err := c.CustomerKey()
		if err != nil {
			return s, fmt.Errorf("s3: %w", err)
		}
		sum := md5.Sum(key)
		s.cKey, s.cMD5 = aws.String(base64.StdEncoding.EncodeToString(key)), aws.String(base64.StdEncoding.EncodeToString(sum[:]))
		clear(key)
	}
	return s, nil
}

func (s sse) customer() (alg, key, md5 *string) {
	if s.typ != rsm.SSEC {
		return nil, nil, nil
	}
	return aws.String("AES256"), s.cKey, s.cMD5
}

func (s sse) put(in *awss3.PutObjectInput) {
	switch s.typ {
	case rsm.SSES3:
		in.ServerSideEncryption = types.ServerSideEncryptionAes256
	case rsm.SSEKMS:
		in.ServerSideEncryption, in.SSEKMSKeyId = types.ServerSideEncryptionAwsKms, s.kmsKeyID
	}
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = s.customer()
}

func (s sse) upload(in *transfermanager.UploadObjectInput) {
	switch s.typ {
	case rsm.SSES3:
		in.ServerSideEncryption = tmtypes.ServerSideEncryptionAes256
	case rsm.SSEKMS:
		in.ServerSideEncryption, in.SSEKMSKeyID = tmtypes.ServerSideEncryptionAwsKms, s.kmsKeyID
	}
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = s.customer()
}

func (s sse) get(in *awss3.GetObjectInput) {
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = s.customer()
}

func (s sse) head(in *awss3.HeadObjectInput) {
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = s.customer()
}

// refused names server-side encryption in a write's error when the store
// refused it.
func (b *Bucket) sseRefused(err error) error {
	var api smithy.APIError
	if b.sse.typ == rsm.SSENone || err == nil || !errors.As(err, &api) {
		return err
	}
	code, msg := api.ErrorCode(), strings.ToLower(api.ErrorMessage())
	switch {
	case code == "NotImplemented", code == "InvalidRequest", code == "InvalidArgument", code == "InvalidEncryptionMethod",
		code == "InvalidEncryptionAlgorithmError", code == "KMSNotConfigured", code == "KMS.NotFoundException",
		code == "KMSKeyNotFoundException", code == "AccessDenied" && strings.Contains(msg, "kms"),
		strings.HasPrefix(code, "XMinioKMS"), strings.Contains(code, "SSE"), strings.Contains(msg, "encryption"):
		return rsm.SSERefused(b.Name(), b.sse.typ, code, err)
	}
	return err
}
