package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/seglog"
)

// asTierdEnv, set to 1, makes this test binary act as the tierd binary.
const asTierdEnv = "TIERD_TEST_AS_TIERD"

// TestMain lets the test binary stand in for tierd: "tierd bench" starts
// os.Executable() as a "tierd run" child for its memory case, and under
// "go test" that is this binary.
//
// Several tests signal this process with SIGHUP (the reload, through "tierd
// config reload" or directly) and check what their handlers did; a SIGHUP
// that arrives while none is registered would end the whole test binary
// ("signal: hangup", every later test lost), so one channel catches them
// for the binary's life.
func TestMain(m *testing.M) {
	if os.Getenv(asTierdEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	os.Exit(m.Run())
}

// TestToolsKeepOthersObjects runs "tierd demo" (the README's command) and
// "tierd bench" at small sizes through the command's entry point against
// a MinIO bucket that already holds another tierd's finished copies of
// topics named demo and bench at the bucket root, and an incomplete upload
// of that tierd's. Afterwards every one of those objects is there byte for
// byte, the upload is still pending, and neither tool left an object of
// its own behind.
func TestToolsKeepOthersObjects(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "tierd")
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure = srv.Endpoint, "tierd", true
	b, err := minio.New(mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seedOtherTierd(t, b, "demo", "bench")
	core, err := miniogo.NewCore(srv.Endpoint, &miniogo.Options{Creds: credentials.NewStaticV4(rsmtest.AccessKey, rsmtest.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	pending := "demo-0/00000000000000009999-CCCCCCCCCCCCCCCCCCCCCC.log"
	if _, err := core.NewMultipartUpload(ctx, "tierd", pending, miniogo.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	before := rsmtest.Snapshot(t, b, "")
	uploadsBefore, err := b.IncompleteUploads(ctx, "")
	if err != nil || len(uploadsBefore) != 1 {
		t.Fatalf("seeded incomplete uploads: %v %v", uploadsBefore, err)
	}

	endpoint := "http://" + srv.Endpoint
	code, out, errOut := runCmd("demo", "--s3-endpoint", endpoint, "--s3-bucket", "tierd")
	if code != 0 || !strings.Contains(out, "600/600 records read back") {
		t.Fatalf("tierd demo: exit %d\n%s\n%s", code, out, errOut)
	}
	checkCleanup(t, out, `deleted the (\d+) objects the demo wrote under tierd-demo-[0-9a-f]{12}/ in s3:`)
	t.Setenv(asTierdEnv, "1") // the memory case's "tierd run" child is this binary
	code, out, errOut = runCmd("bench", "--s3-endpoint", endpoint, "--s3-bucket", "tierd", "--segment-bytes", "1048576",
		"--total-bytes", "3145728", "--count", "5", "--readers", "2", "--objects-bytes", "16777216", "--objects-chunk-sizes", "262144", "--rounds", "1")
	if code != 0 || !strings.Contains(out, "tierd run child") {
		t.Fatalf("tierd bench: exit %d\n%s\n%s", code, out, errOut)
	}
	checkCleanup(t, errOut, `deleted the (\d+) objects this run wrote under tierd-bench-[0-9a-f]{12}/ in s3:`)

	if d := rsmtest.Diff(before, rsmtest.Snapshot(t, b, "")); d != "" {
		t.Errorf("after the demo and the bench the bucket differs from what the other tierd left:\n%s", d)
	}
	if ups, err := b.IncompleteUploads(ctx, ""); err != nil || fmt.Sprint(ups) != fmt.Sprint(uploadsBefore) {
		t.Errorf("incomplete uploads after the tools: %v %v, want %v", ups, err, uploadsBefore)
	}
}

// checkCleanup finds the tool's report of what it deleted in out: a
// positive count, and no cleanup error.
func checkCleanup(t *testing.T, out, pattern string) {
	t.Helper()
	if m := regexp.MustCompile(pattern).FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Errorf("no report of the run's own objects deleted (%s):\n%s", pattern, out)
	}
	if strings.Contains(out, "cleaning up:") {
		t.Errorf("the cleanup reported a problem:\n%s", out)
	}
}

// seedOtherTierd plays another tierd that shares the bucket: a real copier
// over a log dir with partition 0 of each topic tiers its 3 rolled
// segments into the bucket root (the default prefix), then stops.
func seedOtherTierd(t *testing.T, b rsm.Bucket, topics ...string) {
	t.Helper()
	logDir := t.TempDir()
	for _, topic := range topics {
		cfg := seglog.DefaultConfig()
		cfg.SegmentBytes = seglog.MinSegmentBytes
		l, err := seglog.Open(filepath.Join(logDir, topic+"-0"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < 450; off++ {
			if _, err := l.Append(seglog.Record{Value: demoValue(off)}); err != nil { // now: within retention.ms
				t.Fatal(err)
			}
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	store, err := rlmm.Open(rlmm.Config{Dir: filepath.Join(t.TempDir(), "rlmm")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	mgr, err := rsm.NewManager(b, rsm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ccfg := copier.DefaultConfig()
	ccfg.LogDirs = []string{logDir}
	ccfg.BrokerID, ccfg.InstanceID = 7, "other-tierd-instance0" // another broker's tierd
	c, err := copier.New(ccfg, store, mgr)
	if err != nil {
		t.Fatal(err)
	}
	for pass := 0; ; pass++ {
		if _, err := c.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		done := true
		for _, topic := range topics {
			fin, err := store.FinishedSegments(remotelog.TopicPartition{Topic: topic, Partition: 0})
			if err != nil {
				t.Fatal(err)
			}
			done = done && len(fin) == 3
		}
		if done {
			break
		}
		if pass == 10 {
			t.Fatal("the other tierd did not tier its 3 rolled segments per partition in 10 passes")
		}
	}
	for _, topic := range topics {
		var keys []string
		b.Iter(context.Background(), topic+"-0/", func(k string) error { keys = append(keys, k); return nil })
		if len(keys) < 3*4 { // per copy at least .log, .index, .timeindex, .manifest.json
			t.Fatalf("seeded objects under %s-0/: %v", topic, keys)
		}
	}
}
