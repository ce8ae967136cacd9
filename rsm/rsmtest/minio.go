package rsmtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIO credentials of the test server.
const (
	AccessKey = "tierd-test"
	SecretKey = "tierd-test-secret"
)

// MinIOServer is a MinIO server process on 127.0.0.1 with a temp data dir.
type MinIOServer struct {
	Endpoint string // host:port
	cmd      *exec.Cmd
}

// FindMinIO returns the path of the minio binary: $TIERD_MINIO_BIN, minio
// on $PATH, ~/.cache/tierd-bin/minio (where .ci/run installs it), or
// $GOPATH/bin/minio; "" when there is none.
func FindMinIO() string {
	if p := os.Getenv("TIERD_MINIO_BIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p
	}
	home, _ := os.UserHomeDir()
	cands := []string{filepath.Join(home, ".cache", "tierd-bin", "minio")}
	if gp, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		cands = append(cands, filepath.Join(strings.TrimSpace(string(gp)), "bin", "minio"))
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c
		}
	}
	return ""
}

// StartMinIO starts a MinIO server for the test and stops it at cleanup.
// Without a minio binary the test is skipped, or fails when $CI is set.
// It sets AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the test, so the
// tests using it cannot run in parallel.
func StartMinIO(t testing.TB) *MinIOServer {
	t.Helper()
	bin := FindMinIO()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("minio binary not found; CI requires it (see .ci/run)")
		}
		t.Skip("minio binary not found (set TIERD_MINIO_BIN or run .ci/run once)")
	}
	port, console := freePort(t), freePort(t)
	s := &MinIOServer{Endpoint: fmt.Sprintf("127.0.0.1:%d", port)}
	s.cmd = exec.Command(bin, "server", t.TempDir(), "--quiet", "--address", s.Endpoint,
		"--console-address", fmt.Sprintf("127.0.0.1:%d", console))
	s.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	var out strings.Builder
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start minio: %v", err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + s.Endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("minio not ready after 60s: %s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if t, ok := t.(*testing.T); ok {
		t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	}
	return s
}

// CreateBucket makes a bucket on the server.
func (s *MinIOServer) CreateBucket(t testing.TB, name string) {
	t.Helper()
	c, err := miniogo.New(s.Endpoint, &miniogo.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(context.Background(), name, miniogo.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
