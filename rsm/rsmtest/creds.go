package rsmtest

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm"
)

// credentialEnv lists the variables credential chains read.
var credentialEnv = []string{
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
	"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "MINIO_ACCESS_KEY", "MINIO_SECRET_KEY",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
}

// ClearCredentials leaves the test with no credentials anywhere a chain
// looks but instance metadata: the variables unset, HOME and the shared
// files pointed at an empty directory, and the AWS SDK's instance
// metadata client off.
func ClearCredentials(t *testing.T) {
	t.Helper()
	for _, v := range credentialEnv {
		t.Setenv(v, "")
	}
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// CheckCase is one configuration problem a bucket's Check must name.
type CheckCase struct {
	Name string
	// Setup changes the environment (t.Setenv) before the bucket is
	// built, and returns the bucket name to use.
	Setup func(t *testing.T) string
	// Says are the phrases the error must hold; nil: Check must pass.
	Says []string
}

// CheckCases are the problems of a bucket on srv: a missing bucket, an
// unknown access key, a wrong secret key, no credentials; and a good
// configuration. bucket is an existing bucket of srv.
func CheckCases(bucket string) []CheckCase {
	return []CheckCase{
		{"ok", func(t *testing.T) string { return bucket }, nil},
		{"missing bucket", func(t *testing.T) string { return "no-such-bucket" },
			[]string{`the bucket "no-such-bucket" does not exist`, "tierd bucket create"}},
		{"unknown access key", func(t *testing.T) string {
			t.Setenv("AWS_ACCESS_KEY_ID", "nobody-knows-me")
			return bucket
		}, []string{"knows no such access key", `access key id "nobody-knows-me"`, "AWS_ACCESS_KEY_ID"}},
		{"wrong secret key", func(t *testing.T) string {
			t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-do-not-print")
			return bucket
		}, []string{"secret key does not match", `access key id "` + AccessKey + `"`, "AWS_ACCESS_KEY_ID"}},
		{"no credentials", func(t *testing.T) string {
			ClearCredentials(t)
			return bucket
		}, []string{"no credentials", "none found", "looked in"}},
	}
}

// RunCheckCases builds a bucket for each case with newBucket (after the
// case's Setup) and checks Check's verdict: nil for "ok", else an error
// wrapping rsm.ErrMisconfigured that holds the case's phrases and never a
// secret.
func RunCheckCases(t *testing.T, bucket string, newBucket func(t *testing.T, bucket string) rsm.Checker) {
	for _, tc := range CheckCases(bucket) {
		t.Run(tc.Name, func(t *testing.T) {
			b := newBucket(t, tc.Setup(t))
			err := b.Check(context.Background(), "some/prefix/")
			if tc.Says == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !errors.Is(err, rsm.ErrMisconfigured) {
				t.Fatalf("Check = %v, want rsm.ErrMisconfigured", err)
			}
			msg := err.Error()
			t.Log(msg)
			for _, s := range tc.Says {
				if !strings.Contains(msg, s) {
					t.Errorf("Check error lacks %q:\n%s", s, msg)
				}
			}
			for _, secret := range []string{SecretKey, "wrong-secret-do-not-print"} {
				if strings.Contains(msg, secret) {
					t.Errorf("Check error shows a secret key:\n%s", msg)
				}
			}
		})
	}
}
