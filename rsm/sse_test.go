package rsm_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/encrypt"

	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/rsm/s3"
)

// sseBucket opens a bucket of client kind ("minio-go", "aws-sdk-go-v2")
// on srv with server-side encryption sse.
func sseBucket(t *testing.T, srv *rsmtest.MinIOServer, kind, name string, sse rsm.SSE) (rsm.Bucket, error) {
	scheme, ca := "http://", ""
	if srv.Cert != nil {
		scheme, ca = "https://", srv.Cert.CAFile
	}
	if kind == "minio-go" {
		cfg := minio.DefaultConfig()
		cfg.Endpoint, cfg.Bucket, cfg.PartSize, cfg.CAFile, cfg.SSE = scheme+srv.Endpoint, name, 5<<20, ca, sse
		return minio.New(cfg, nil)
	}
	cfg := s3.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.PathStyle, cfg.PartSize, cfg.CAFile, cfg.SSE = scheme+srv.Endpoint, name, true, 5<<20, ca, sse
	return s3.New(context.Background(), cfg, nil)
}

// rawClient is a minio-go client of srv that asks for no encryption.
func rawClient(t *testing.T, srv *rsmtest.MinIOServer) *miniogo.Client {
	tr, err := miniogo.DefaultTransport(true)
	if err != nil {
		t.Fatal(err)
	}
	tr.TLSClientConfig.RootCAs = srv.Cert.Pool
	c, err := miniogo.New(srv.Endpoint, &miniogo.Options{Creds: credentials.NewStaticV4(rsmtest.AccessKey, rsmtest.SecretKey, ""), Secure: true, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func keyFile(t *testing.T) (string, []byte) {
	k := make([]byte, 32)
	rand.Read(k)
	p := filepath.Join(t.TempDir(), "sse-c.key")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, k
}

// TestServerSideEncryption: for both bucket clients and every SSE type,
// the bucket contract holds on a MinIO with a KMS (uploads in parts,
// ranged reads, conditional writes), and the store says each object is
// encrypted as asked; an sse-c object does not read without its key, or
// with another.
func TestServerSideEncryption(t *testing.T) {
	srv := rsmtest.StartMinIOKMS(t)
	ctx := context.Background()
	raw := rawClient(t, srv)
	ckey, keyBytes := keyFile(t)
	for _, kind := range []string{"minio-go", "aws-sdk-go-v2"} {
		for _, c := range []struct {
			name   string
			sse    rsm.SSE
			header string // x-amz-server-side-encryption the store answers, "" for sse-c
		}{
			{"sse-s3", rsm.SSE{Type: rsm.SSES3}, "AES256"},
			{"sse-kms", rsm.SSE{Type: rsm.SSEKMS, KMSKeyID: rsmtest.KMSKeyID}, "aws:kms"},
			{"sse-c", rsm.SSE{Type: rsm.SSEC, CustomerKeyFile: ckey}, ""},
		} {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				name := strings.ReplaceAll(kind+"-"+c.name, "-", "")
				srv.CreateBucket(t, name)
				b, err := sseBucket(t, srv, kind, name, c.sse)
				if err != nil {
					t.Fatal(err)
				}
				rsmtest.AcceptanceTest(t, b, 6<<20)
				data := bytes.Repeat([]byte("stored encrypted "), 1000)
				if err := b.Upload(ctx, "p/t-0/sse", bytes.NewReader(data), int64(len(data))); err != nil {
					t.Fatal(err)
				}
				st, err := raw.StatObject(ctx, name, "p/t-0/sse", miniogo.StatObjectOptions{})
				if c.header != "" {
					if err != nil || st.Metadata.Get("X-Amz-Server-Side-Encryption") != c.header {
						t.Fatalf("stat: %v, encryption %q; want %q", err, st.Metadata.Get("X-Amz-Server-Side-Encryption"), c.header)
					}
					if c.sse.Type == rsm.SSEKMS && !strings.Contains(st.Metadata.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"), rsmtest.KMSKeyID) {
						t.Errorf("kms key id %q", st.Metadata.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"))
					}
					return
				}
				if err == nil {
					t.Fatal("an sse-c object stats without its key")
				}
				other := make([]byte, 32)
				rand.Read(other)
				for _, k := range [][]byte{other, keyBytes} {
					sc, _ := encrypt.NewSSEC(k)
					obj, err := raw.GetObject(ctx, name, "p/t-0/sse", miniogo.GetObjectOptions{ServerSideEncryption: sc})
					if err == nil {
						var got []byte
						got, err = io.ReadAll(obj)
						if err == nil && !bytes.Equal(got, data) {
							t.Fatal("sse-c read gave other bytes")
						}
					}
					if right := bytes.Equal(k, keyBytes); (err == nil) != right {
						t.Fatalf("read with the right key %t: %v", right, err)
					}
				}
			})
		}
	}
}

// TestServerSideEncryptionRefused: a store without a KMS refuses sse-s3
// and sse-kms writes, and the error says so, naming the setting; sse-c
// on a plain http endpoint is a config error.
func TestServerSideEncryptionRefused(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	ctx := context.Background()
	for _, kind := range []string{"minio-go", "aws-sdk-go-v2"} {
		for _, sse := range []rsm.SSE{{Type: rsm.SSES3}, {Type: rsm.SSEKMS, KMSKeyID: "no-such-key"}} {
			name := strings.ReplaceAll(kind+sse.Type, "-", "")
			srv.CreateBucket(t, name)
			b, err := sseBucket(t, srv, kind, name, sse)
			if err != nil {
				t.Fatal(err)
			}
			err = b.Upload(ctx, "p/t-0/x", strings.NewReader("x"), 1)
			if err == nil || !strings.Contains(err.Error(), "refused server-side encryption "+sse.Type+" (sse.type)") {
				t.Errorf("%s %s: upload: %v", kind, sse.Type, err)
			}
			t.Logf("%s: %v", kind, err)
			_, err = b.PutIfAbsent(ctx, "p/t-0/y", []byte("y"))
			if err == nil || !strings.Contains(err.Error(), "refused server-side encryption") || errors.Is(err, rsm.ErrPreconditionFailed) {
				t.Errorf("%s %s: conditional put: %v", kind, sse.Type, err)
			}
		}
		ckey, _ := keyFile(t)
		if _, err := sseBucket(t, srv, kind, "plain", rsm.SSE{Type: rsm.SSEC, CustomerKeyFile: ckey}); err == nil || !strings.Contains(err.Error(), "must be https") {
			t.Errorf("%s: sse-c over http: %v", kind, err)
		}
	}
	for _, bad := range []rsm.SSE{{Type: "aes"}, {Type: rsm.SSES3, KMSKeyID: "k"}, {Type: rsm.SSEC}, {CustomerKeyFile: "/x"}} {
		if err := bad.Validate("s3"); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
