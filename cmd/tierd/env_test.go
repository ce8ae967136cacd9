package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/testutil/tmpfs"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// envConfig writes a tierd.yaml over a filesystem bucket with metadata in
// metaDir and extra appended to the metadata section.
func envConfig(t *testing.T, metaDir, metaExtra string) string {
	t.Helper()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	p := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), freeAddr(t))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(data), "  dir: "+filepath.Join(root, "metadata")+"\n", "  dir: "+metaDir+"\n"+metaExtra, 1)
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runBounded runs "tierd run", failing the test if it has not returned
// within a minute (on a full disk it used to run for ever).
func runBounded(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	type result struct {
		code int
		err  string
	}
	done := make(chan result, 1)
	go func() {
		var o, e bytes.Buffer
		code := run(context.Background(), args, &o, &e)
		done <- result{code, e.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.err
	case <-time.After(time.Minute):
		t.Fatal("tierd run did not return")
		return 0, ""
	}
}

// A metadata dir that is full or read-only at start: "tierd run" exits 1
// at once with an error line naming the dir, not a loop of lines. On a
// real tmpfs where the test may mount one (a new store, and an existing
// one whose WAL Pebble must flush while opening: the case that wrote
// thousands of lines a second and never exited); below min_free_bytes
// anywhere.
func TestRunMetadataDirFailsFast(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T) (metaDir, extra string)
		says  string
	}{
		{"below min_free_bytes", func(t *testing.T) (string, string) {
			return filepath.Join(t.TempDir(), "metadata"), "  min_free_bytes: 4611686018427387904\n"
		}, "is full"},
		{"full tmpfs new store", func(t *testing.T) (string, string) {
			mnt := tmpfs.Mount(t, "16m")
			tmpfs.Fill(t, mnt)
			return filepath.Join(mnt, "metadata"), "  min_free_bytes: 0\n"
		}, "is full"},
		{"full tmpfs existing store", func(t *testing.T) (string, string) {
			mnt := tmpfs.Mount(t, "16m")
			dir := filepath.Join(mnt, "metadata")
			s, err := rlmm.Open(rlmm.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetClusterID("unflushed-row"); err != nil {
				t.Fatal(err)
			}
			s.Close()
			tmpfs.Fill(t, mnt)
			return dir, "  min_free_bytes: 0\n"
		}, "is full"},
		{"read-only tmpfs", func(t *testing.T) (string, string) {
			mnt := tmpfs.Mount(t, "1m")
			tmpfs.ReadOnly(t, mnt, true)
			return filepath.Join(mnt, "metadata"), ""
		}, "is read-only"},
		{"read-only dir", func(t *testing.T) (string, string) {
			if os.Geteuid() == 0 {
				t.Skip("root writes into a mode 0555 dir; the tmpfs case covers read-only")
			}
			parent := t.TempDir()
			os.Chmod(parent, 0o555)
			t.Cleanup(func() { os.Chmod(parent, 0o755) })
			return filepath.Join(parent, "metadata"), ""
		}, "is not writable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, extra := tc.setup(t)
			code, stderr := runBounded(t, "run", "--config", envConfig(t, dir, extra))
			if code != 1 || !strings.Contains(stderr, "metadata dir "+dir+" "+tc.says) {
				t.Fatalf("exit %d, want 1 and the dir named:\n%s", code, stderr)
			}
			if n := strings.Count(stderr, "level=ERROR"); n != 1 || strings.Count(stderr, "\n") > 5 {
				t.Fatalf("%d error lines, want one:\n%s", n, stderr)
			}
		})
	}
}

// The metadata dir fills while tierd runs: /-/ready turns 503 naming it,
// and 200 again once space returns, without a restart.
func TestReadinessFollowsMetadataDir(t *testing.T) {
	mnt := tmpfs.Mount(t, "16m")
	cfgPath := envConfig(t, filepath.Join(mnt, "metadata"), "  min_free_bytes: 4194304\n")
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	writePartition(t, filepath.Join(cfg.Copier.LogDirs[0], "orders-0"), 100, 0)
	startServe(t, cfgPath)
	url := "http://" + cfg.HTTP.Listen + "/-/ready"
	waitReady(t, url, http.StatusOK, "")
	admin, err := grpcapi.Dial("unix://" + daemon.AdminSocket(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	waitPartition(t, admin, "orders", 0, "up_to_date", "")
	filler := tmpfs.Fill(t, mnt)
	waitReady(t, url, http.StatusServiceUnavailable, "metadata dir "+cfg.Metadata.Dir+" is full")
	waitPartition(t, admin, "orders", 0, "metadata_unwritable", "metadata dir "+cfg.Metadata.Dir+" is full")
	os.Remove(filler)
	waitReady(t, url, http.StatusOK, "")
	waitPartition(t, admin, "orders", 0, "up_to_date", "")
}

// waitPartition polls the PartitionStatus RPC until the partition's reason
// (its state when reason is a state) is want and its detail holds says,
// failing the test after a minute.
func waitPartition(t *testing.T, c *grpcapi.Client, topic string, partition int32, want, says string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		resp, err := c.Admin().PartitionStatus(context.Background(), &tierdpb.PartitionStatusRequest{})
		last = fmt.Sprint(err)
		for _, p := range resp.GetPartitions() {
			if p.GetTopic() == topic && p.GetPartition() == partition {
				last = fmt.Sprintf("%s %s: %s", p.GetState(), p.GetReason(), p.GetDetail())
				if (p.GetReason() == want || p.GetState() == want) && strings.Contains(p.GetDetail(), says) {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s-%d never %s saying %q; last: %s", topic, partition, want, says, last)
}

// waitReady polls url until it answers code with a body holding want,
// failing the test after a minute.
func waitReady(t *testing.T, url string, code int, want string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
			if resp.StatusCode == code && strings.Contains(string(body), want) {
				return string(body)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never answered %d %q; last: %s", url, code, want, last)
	return ""
}

// The object store goes away and comes back: /-/ready turns 503 saying it
// is unreachable and tierd_bucket_up 0, a read of tiered data says
// "object store unreachable" (UNAVAILABLE); then both recover by
// themselves.
func TestReadinessFollowsObjectStore(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "outage")
	proxy := rsmtest.StartFaultProxy(t, srv.Endpoint)
	root := t.TempDir()
	writePartition(t, filepath.Join(root, "logs", "orders-2"), 600, 0)
	fetchAddr, httpAddr, kafkaAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	cfgPath := writeConfig(t, root, fmt.Sprintf("minio:\n    endpoint: http://%s\n    bucket: outage\n    max_retries: 1", proxy.Endpoint), fetchAddr, httpAddr)
	appendFile(t, cfgPath, "kafka:\n  listen: "+kafkaAddr+"\n")
	var log syncBuffer
	startServeLog(t, cfgPath, &log)
	ready, metrics := "http://"+httpAddr+"/-/ready", "http://"+httpAddr+"/metrics"
	c, err := grpcapi.Dial(fetchAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admin := dialSocketIn(t, root)
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.API().ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: "orders", Partition: 2})
		if err == nil && resp.HighestTieredOffset == 411 && resp.LocalLogStartOffset == 412 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not tiered in time: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitReady(t, ready, http.StatusOK, "")
	waitReady(t, metrics, http.StatusOK, "tierd_bucket_up 1")

	proxy.SetRule(func(*http.Request) rsmtest.Fault { return rsmtest.Reset })
	waitReady(t, ready, http.StatusServiceUnavailable, "object store unreachable: minio:http://"+proxy.Endpoint+"/outage")
	waitReady(t, metrics, http.StatusOK, "tierd_bucket_up 0")
	// The partition says why nothing happens, with the probe's error.
	waitPartition(t, admin, "orders", 2, "store_unreachable", "minio:http://"+proxy.Endpoint+"/outage")
	_, err = c.API().Fetch(ctx, &tierdpb.FetchRequest{Topic: "orders", Partition: 2, Offset: 300, MaxBytes: 1})
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "object store unreachable: ") {
		t.Fatalf("read during the outage: %v, want UNAVAILABLE saying the object store is unreachable", err)
	}
	// A Kafka consumer's read: tierd's log says why it failed.
	kc, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {2: kgo.NewOffset().At(200)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(log.String(), "Kafka Fetch read failed"); {
		if time.Now().After(deadline) {
			t.Fatalf("no Kafka read failure logged:\n%s", log.String())
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		kc.PollFetches(pctx)
		cancel()
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "Kafka Fetch read failed") && !strings.Contains(line, "object store unreachable: ") {
			t.Fatalf("the Kafka listener's line does not say the store is unreachable:\n%s", line)
		}
	}

	proxy.SetRule(nil)
	waitReady(t, ready, http.StatusOK, "")
	waitReady(t, metrics, http.StatusOK, "tierd_bucket_up 1")
	resp, err := c.API().Fetch(ctx, &tierdpb.FetchRequest{Topic: "orders", Partition: 2, Offset: 300, MaxBytes: 1})
	if err != nil || !bytes.Contains(resp.Records, demoValue(300)[:20]) {
		t.Fatalf("read after the outage: %v", err)
	}
}

// A missing bucket or credentials the store refuses: "tierd run" exits 1
// at once saying which, where the credentials came from and how to fix
// it, never the secret; "tierd bucket create" then creates the bucket,
// once.
func TestRunMisconfiguredBucket(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	// A MinIO that answers its health check may still refuse bucket
	// requests for a moment (XMinioServerNotInitialized, which tierd
	// rightly waits out): CreateBucket waits for it.
	warm, err := minio.New(minio.Config{Endpoint: srv.Endpoint, Bucket: "warm-up", Region: "us-east-1", Insecure: true, PathStyle: true,
		PartSize: 5 << 20, PartConcurrency: 1, MaxRetries: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfgFor := func(t *testing.T, bucket string) string {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "logs"), 0o755)
		return writeConfig(t, root, fmt.Sprintf("minio:\n    endpoint: http://%s\n    bucket: %s\n    max_retries: 1", srv.Endpoint, bucket), freeAddr(t), freeAddr(t))
	}
	t.Run("missing bucket then bucket create", func(t *testing.T) {
		p := cfgFor(t, "made-by-tierd")
		code, stderr := runBounded(t, "run", "--config", p)
		if code != 1 || !strings.Contains(stderr, `made-by-tierd\" does not exist`) || !strings.Contains(stderr, "tierd bucket create") ||
			strings.Count(stderr, "level=ERROR") != 1 {
			t.Fatalf("run on a missing bucket: exit %d\n%s", code, stderr)
		}
		for i, want := range []string{"created bucket minio:http://" + srv.Endpoint + "/made-by-tierd", "exists already; nothing to do"} {
			code, out, errOut := runCmd("bucket", "create", "--config", p)
			if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "tierd's credentials can list it") {
				t.Fatalf("bucket create #%d: exit %d, want %q:\n%s%s", i+1, code, want, out, errOut)
			}
		}
	})
	t.Run("wrong secret key", func(t *testing.T) {
		srv.CreateBucket(t, "guarded")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
		code, stderr := runBounded(t, "run", "--config", cfgFor(t, "guarded"))
		if code != 1 || !strings.Contains(stderr, "secret key does not match") || !strings.Contains(stderr, "AWS_ACCESS_KEY_ID") ||
			strings.Count(stderr, "level=ERROR") != 1 {
			t.Fatalf("run with a wrong secret: exit %d\n%s", code, stderr)
		}
		if strings.Contains(stderr, "not-the-secret") || strings.Contains(stderr, rsmtest.SecretKey) {
			t.Fatalf("the error shows a secret:\n%s", stderr)
		}
	})
}

func TestBucketCreateFilesystem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new-bucket")
	p := envConfig(t, filepath.Join(t.TempDir(), "metadata"), "")
	data, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(data), "filesystem:\n    dir: ", "filesystem:\n    dir: "+dir+"\n    #", 1)), 0o644)
	for i, want := range []string{"created filesystem bucket " + dir, "exists already"} {
		code, out, errOut := runCmd("bucket", "create", "--config", p)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("bucket create #%d: exit %d, want %q:\n%s%s", i+1, code, want, out, errOut)
		}
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("no bucket dir: %v", err)
	}
	if code, _, _ := runCmd("bucket"); code != 2 {
		t.Fatalf("bare 'tierd bucket': exit %d, want 2", code)
	}
	if code, out, _ := runCmd("bucket", "-h"); code != 0 || !strings.Contains(out, bucketUsage) {
		t.Fatalf("'tierd bucket -h': exit %d\n%s", code, out)
	}
}

// startServeLog is startServe logging to w.
func startServeLog(t *testing.T, cfgPath string, w io.Writer) {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	log, flush := newLogger(w, slog.LevelInfo)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, log) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop")
		}
		flush()
	})
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}
