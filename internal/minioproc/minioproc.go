// Package minioproc starts a MinIO server process on 127.0.0.1, for tests
// and for "tierd bench" when no endpoint is given.
package minioproc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Credentials of the servers started here.
const (
	AccessKey = "tierd-test"
	SecretKey = "tierd-test-secret"
)

// ErrNoBinary is returned by Start when no minio binary is found.
var ErrNoBinary = errors.New("minio binary not found (set TIERD_MINIO_BIN, or run `make tools`, which installs it in ~/.cache/tierd-bin)")

// Find returns the path of the minio binary: $TIERD_MINIO_BIN, minio on
// $PATH, ~/.cache/tierd-bin/minio (where `make tools` installs it), or
// $GOPATH/bin/minio; "" when there is none.
func Find() string {
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

// Server is a running MinIO process.
type Server struct {
	Endpoint string // host:port
	// Secure is true when the server speaks HTTPS (StartTLS).
	Secure bool
	// Transport reaches the server: it trusts the server's certificate
	// when Secure.
	Transport *http.Transport
	out       *syncBuffer
	args      []string // the server's command line after the binary
	bin       string
	scheme    string
	env       []string // added to the server's environment

	mu  sync.Mutex
	cmd *exec.Cmd // the running process; nil once stopped
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start starts MinIO serving dataDir over plain HTTP on free ports of
// 127.0.0.1 and waits up to 60s for it to be ready. Errors: ErrNoBinary, a
// failed start, or not ready in time (with MinIO's output).
func Start(dataDir string) (*Server, error) { return start(dataDir, "") }

// StartTLS is Start serving HTTPS with the certificate in certsDir, which
// holds public.crt and private.key (PEM) as MinIO's --certs-dir expects.
// The server's Transport trusts the certificates of public.crt (a
// self-signed one for 127.0.0.1 in tests). Errors: those of Start, and an
// unreadable or certificate-less public.crt.
func StartTLS(dataDir, certsDir string) (*Server, error) {
	if certsDir == "" {
		return nil, errors.New("minioproc: StartTLS needs a certs dir")
	}
	return start(dataDir, certsDir)
}

// StartEnv is Start (certsDir "") or StartTLS with env added to the
// server's environment ("NAME=value"), e.g. MINIO_KMS_SECRET_KEY for
// server-side encryption with a KMS key.
func StartEnv(dataDir, certsDir string, env []string) (*Server, error) {
	return startEnv(dataDir, certsDir, env)
}

func start(dataDir, certsDir string) (*Server, error) { return startEnv(dataDir, certsDir, nil) }

func startEnv(dataDir, certsDir string, env []string) (*Server, error) {
	bin := Find()
	if bin == "" {
		return nil, ErrNoBinary
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	scheme := "http"
	if certsDir != "" {
		pem, err := os.ReadFile(filepath.Join(certsDir, "public.crt"))
		if err != nil {
			return nil, fmt.Errorf("minioproc: read the server certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("minioproc: no PEM certificate in %s", filepath.Join(certsDir, "public.crt"))
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		scheme = "https"
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	console, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: fmt.Sprintf("127.0.0.1:%d", port), Secure: certsDir != "", Transport: tr, out: &syncBuffer{},
		bin: bin, scheme: scheme, env: env}
	s.args = []string{"server", dataDir, "--quiet", "--address", s.Endpoint,
		"--console-address", fmt.Sprintf("127.0.0.1:%d", console)}
	if certsDir != "" {
		s.args = append(s.args, "--certs-dir", certsDir)
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	return s, nil
}

// Restart stops the server, when it runs, and starts it again over the
// same data dir, on the same address and with the same certificate, as
// a store back from an outage: what the data dir holds (objects, parts
// of multipart uploads in progress) is kept, what MinIO holds only in
// memory is not. It waits for readiness as Start does. Errors: those of
// Start (the address taken by another process meanwhile included).
func (s *Server) Restart() error {
	s.Stop()
	return s.run()
}

// run starts the process and waits up to 60s for it to be ready.
func (s *Server) run() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	cmd.Env = append(cmd.Env, s.env...)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	// The server goes with its parent, even one killed outright.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start minio: %w", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	hc := &http.Client{Transport: s.Transport, Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(s.scheme + "://" + s.Endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			// The health check can answer 200 before the object layer takes
			// requests ("Server not initialized yet"); a signed ListBuckets
			// that succeeds is the proof that S3 calls will. The root
			// credentials work before the IAM subsystem is up, so an
			// unknown access key must also be refused as unknown, not with
			// "IAM sub-system not initialized yet".
			if resp.StatusCode == http.StatusOK && s.answersS3() && s.iamReady() {
				return nil
			}
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("minio not ready after 60s: %s", s.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answersS3 reports whether a signed ListBuckets succeeds.
func (s *Server) answersS3() bool { return s.listBuckets(AccessKey, SecretKey) == nil }

// iamReady reports whether MinIO's IAM subsystem answers: a ListBuckets
// signed with an access key nobody has is refused as InvalidAccessKeyId.
func (s *Server) iamReady() bool {
	return miniogo.ToErrorResponse(s.listBuckets("tierd-readiness-probe", "not-a-secret")).Code == "InvalidAccessKeyId"
}

// listBuckets sends one ListBuckets signed with the given key pair.
func (s *Server) listBuckets(accessKey, secretKey string) error {
	c, err := miniogo.New(s.Endpoint, &miniogo.Options{
		Creds: credentials.NewStaticV4(accessKey, secretKey, ""), Secure: s.Secure, Transport: s.Transport,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.ListBuckets(ctx)
	return err
}

// Pid is the server's process id, 0 when it is stopped.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop kills the server and waits for it; a stopped server is left as
// it is.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// CreateBucket makes a bucket on the server.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	c, err := miniogo.New(s.Endpoint, &miniogo.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Secure: s.Secure, Transport: s.Transport,
	})
	if err != nil {
		return err
	}
	if err := c.MakeBucket(ctx, name, miniogo.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("make bucket %s: %w", name, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
