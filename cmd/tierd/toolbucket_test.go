package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// TestToolsCheckTheBucketFirst: "tierd verify" and "tierd rlmm rebuild"
// without credentials fail at once with the message "tierd run" gives
// (no credentials, where they were looked for, the fix), the store's
// "Access Denied" at most once and no line per copy; the rebuild moves
// nothing. A store that does not answer fails them the same way. With the
// credentials back, verify checks the copies.
func TestToolsCheckTheBucketFirst(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "tools")
	root := t.TempDir()
	writePartition(t, filepath.Join(root, "logs", "orders-0"), 600, 0)
	fetchAddr := freeAddr(t)
	cfgPath := writeConfig(t, root, fmt.Sprintf("minio:\n    endpoint: http://%s\n    bucket: tools\n    max_retries: 1", srv.Endpoint), fetchAddr, freeAddr(t))
	stop := startServe(t, cfgPath)
	c, err := grpcapi.Dial(fetchAddr)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := c.API().ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: "orders", Partition: 0})
		if err == nil && resp.HighestTieredOffset == 411 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("tierd did not tier two segments: %v %v", resp, err)
		}
	}
	c.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	metaDir := filepath.Join(root, "metadata")

	t.Run("no credentials", func(t *testing.T) {
		rsmtest.ClearCredentials(t)
		for _, args := range [][]string{{"verify"}, {"rlmm", "rebuild"}} {
			code, out, errOut := runCmd(append(args, "--config", cfgPath)...)
			if code != 1 || out != "" && args[0] == "verify" || !strings.Contains(errOut, "no credentials: requests went unsigned and were refused") ||
				!strings.Contains(errOut, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") || strings.Count(errOut, "Access Denied") > 1 {
				t.Errorf("tierd %s without credentials: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
			}
		}
	})
	t.Run("store not answering", func(t *testing.T) {
		down := strings.Replace(readFile(t, cfgPath), srv.Endpoint, freeAddr(t), 1)
		p := filepath.Join(t.TempDir(), "down.yaml")
		os.WriteFile(p, []byte(down), 0o644)
		for _, args := range [][]string{{"verify"}, {"rlmm", "rebuild"}} {
			code, out, errOut := runCmd(append(args, "--config", p)...)
			if code != 1 || out != "" && args[0] == "verify" || !strings.Contains(errOut, "does not answer") {
				t.Errorf("tierd %s with the store down: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
			}
		}
	})
	if old, _ := filepath.Glob(metaDir + ".old-*"); len(old) != 0 {
		t.Errorf("a failed rebuild moved the metadata dir: %v", old)
	}
	code, out, errOut := runCmd("verify", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "verified 2 copies") || !strings.Contains(out, "2 ok") {
		t.Errorf("tierd verify with credentials: exit %d\n%s%s", code, out, errOut)
	}
}
