package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm/rsmtest"
)

func TestDemoEmbedded(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "keep")
	var out, errOut bytes.Buffer
	if err := demo(context.Background(), demoOptions{keep: keep, runID: "embedded"}, &out, &errOut); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"600/600 records read back",
		"600/600 records read back through the Kafka listener (franz-go): offsets, values, timestamps",
		"600/600 records of demo-keyed read back through the Kafka listener, from both tiers: offsets, keys, values, headers, timestamps",
		"log start offset 0, local log start offset 600, high watermark 600",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// The reference run's segments, byte for byte, as a broker writes them: 600 records of 5000
	// bytes, one per batch, no key, no headers, segment.bytes=1048576.
	for _, row := range [][]string{{"0", "205", "1044420", "no", "COPY_SEGMENT_FINISHED", "plain"}, {"206", "411", "1044420", "no", "COPY_SEGMENT_FINISHED", "plain"},
		{"412", "599", "953160", "no", "COPY_SEGMENT_FINISHED", "plain"}, {"600", "-", "0", "yes", "-", "-"}} {
		if !strings.Contains(s, strings.Join(row, " ")) && !containsFields(s, row) {
			t.Errorf("output lacks row %v:\n%s", row, s)
		}
	}
	for _, sub := range []string{"logs/demo-0/00000000000000000600.log", "metadata", "bucket/tierd-demo-embedded/demo-0"} {
		if _, err := os.Stat(filepath.Join(keep, sub)); err != nil {
			t.Errorf("--keep: %v", err)
		}
	}
	// The kept state lists through "tierd segments" (tierd stopped) with
	// the kept tierd.yaml, as the demo's last line says.
	code, o, e := runCmd("segments", "--config", keptConfig(t, keep, "tierd-demo-embedded"))
	if code != 0 || !strings.Contains(o, "demo-0: log start offset 0, local log start offset 600, highest tiered offset 599") {
		t.Fatalf("segments: exit %d\n%s\n%s", code, o, e)
	}
	if err := demo(context.Background(), demoOptions{keep: keep}, &out, &errOut); err == nil {
		t.Fatal("--keep accepted a non-empty directory")
	}
}

func containsFields(s string, fields []string) bool {
	for _, line := range strings.Split(s, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// dialSocketIn dials the admin socket of the tierd whose metadata dir is
// root/metadata (writeConfig's): the Admin service is served there.
func dialSocketIn(t *testing.T, root string) *grpcapi.Client {
	t.Helper()
	c, err := grpcapi.Dial("unix://" + filepath.Join(root, "metadata", "admin", "tierd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func writeConfig(t *testing.T, root, bucket, fetchAddr, httpAddr string) string {
	t.Helper()
	typ := strings.SplitN(bucket, ":", 2)[0]
	y := fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
  remote.log.manager.task.interval.ms: 100
  file.delete.delay.ms: 0
  log.local.retention.ms: 0
  initial_retention_delay: 0s
bucket:
  type: %s
  %s
metadata:
  dir: %s
fetch:
  listen: %s
http:
  listen: "%s"
`, filepath.Join(root, "logs"), typ, bucket, filepath.Join(root, "metadata"), fetchAddr, httpAddr)
	p := filepath.Join(t.TempDir(), "tierd.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if typ == "filesystem" {
		bucketCreate(t, p)
	}
	return p
}

// bucketCreate runs "tierd bucket create --config p", as an operator does
// before the first "tierd run".
func bucketCreate(t *testing.T, p string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"bucket", "create", "--config", p}, &out, &errOut); code != 0 {
		t.Fatalf("tierd bucket create: exit %d: %s", code, errOut.String())
	}
}

// TestDaemonOverMinIO runs the daemon's run group (copier loop, gRPC fetch
// server, HTTP metrics) against MinIO with a config file, as "tierd run".
func TestDaemonOverMinIO(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "daemon")
	root := t.TempDir()
	writePartition(t, filepath.Join(root, "logs", "orders-2"), 600, 0)
	fetchAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfgPath := writeConfig(t, root, fmt.Sprintf("minio:\n    endpoint: http://%s\n    bucket: daemon", srv.Endpoint), fetchAddr, httpAddr)
	stop := startServe(t, cfgPath)
	ctx := context.Background()
	c, err := grpcapi.Dial(fetchAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.API().ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: "orders", Partition: 2})
		if err == nil && resp.HighestTieredOffset == 411 && resp.LocalLogStartOffset == 412 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not tier in time: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := c.API().Fetch(ctx, &tierdpb.FetchRequest{Topic: "orders", Partition: 2, Offset: 300, MaxBytes: 1})
	if err != nil || !bytes.Contains(resp.Records, demoValue(300)[:20]) {
		t.Fatalf("fetch 300: %v", err)
	}
	mresp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(mresp.Body)
	mresp.Body.Close()
	if !strings.Contains(body.String(), "tierd_copier_segments_copied_total 2") {
		t.Errorf("metrics lack the copy count:\n%.2000s", body.String())
	}
	if err := stop(); err != nil {
		t.Fatalf("serve returned %v", err)
	}
}

// startServe runs serve for the config at cfgPath in the background, as
// "tierd run" does. stop ends it and returns what serve returned; the
// test fails if it does not stop within 10s. The test's end stops it too.
func startServe(t *testing.T, cfgPath string) (stop func() error) {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	var once sync.Once
	var res error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case res = <-done:
			case <-time.After(10 * time.Second):
				t.Error("daemon did not stop")
			}
		})
		return res
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestCheckLogDirs: log_dirs must exist and be log dirs, not partition
// directories.
func TestCheckLogDirs(t *testing.T) {
	dir := t.TempDir()
	if err := daemon.CheckLogDirs([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("missing log dir accepted")
	}
	part := filepath.Join(dir, "orders-0")
	os.MkdirAll(part, 0o755)
	os.WriteFile(filepath.Join(part, "00000000000000000000.log"), nil, 0o644)
	if err := daemon.CheckLogDirs([]string{part}); err == nil || !strings.Contains(err.Error(), "partition directory") {
		t.Errorf("partition dir as log dir: %v", err)
	}
	if err := daemon.CheckLogDirs([]string{dir}); err != nil {
		t.Errorf("log dir: %v", err)
	}
}

// /-/ready stays 503 while the bucket does not answer.
func TestReadyWaitsForBucket(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	httpAddr := freeAddr(t)
	cfgPath := writeConfig(t, root, "minio:\n    endpoint: http://"+freeAddr(t)+"\n    bucket: nowhere\n    max_retries: 1", freeAddr(t), httpAddr)
	startServe(t, cfgPath)
	var code int
	for i := 0; i < 100; i++ {
		if resp, err := http.Get("http://" + httpAddr + "/-/ready"); err == nil {
			code = resp.StatusCode
			resp.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/-/ready = %d with an unreachable bucket", code)
	}
}
