package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
)

// readyAnswer returns /-/ready's status code and body.
func readyAnswer(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/-/ready")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

// metricNumber returns the value of an unlabelled series on /metrics, -1
// when it is not there.
func metricNumber(t *testing.T, addr, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(get(t, "http://"+addr+"/metrics"), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return -1
}

// statusJSON is "tierd status --json" of the running tierd.
func statusJSON(t *testing.T, cfgPath string) remotelog.TieringStatus {
	t.Helper()
	code, o, e := runCmd("status", "--config", cfgPath, "--json")
	var s remotelog.TieringStatus
	if err := json.Unmarshal([]byte(o), &s); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d %v\n%s\n%s", code, err, o, e)
	}
	return s
}

// TestFilesystemBucketGoneWhileRunning: the filesystem bucket's directory
// moved away while tierd runs is the object store down: tierd_bucket_up
// 0, /-/ready 503 "object store unreachable" naming the directory as
// missing; passes (several, each checking copies) mark nothing damaged
// and do not recreate the directory. Moved back, tierd is ready again,
// still with no copy marked damaged.
func TestFilesystemBucketGoneWhileRunning(t *testing.T) {
	root := t.TempDir()
	writePartition(t, filepath.Join(root, "logs", "orders-0"), 600, 0)
	if err := os.WriteFile(filepath.Join(root, "logs", kafkalog.ReplicationOffsetCheckpointFile), []byte("0\n1\norders 0 600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bucket := filepath.Join(root, "bucket")
	fetchAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+bucket, fetchAddr, httpAddr)
	stop := startServe(t, cfgPath)
	defer stop()
	testtools.WaitFor(t, "tierd healthy", func() bool { return healthy(httpAddr) })
	testtools.WaitFor(t, "orders-0 up to date", func() bool {
		s := statusJSON(t, cfgPath)
		return len(s.Partitions) == 1 && s.Partitions[0].State == remotelog.TierUpToDate && s.Partitions[0].RemoteSegments > 0
	})
	if err := os.Rename(bucket, bucket+".away"); err != nil {
		t.Fatal(err)
	}
	testtools.WaitFor(t, "not ready, naming the missing directory", func() bool {
		code, body := readyAnswer(t, httpAddr)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "object store unreachable") && strings.Contains(body, bucket+" is missing")
	})
	if m := get(t, "http://"+httpAddr+"/metrics"); !strings.Contains(m, "\ntierd_bucket_up 0\n") {
		t.Fatalf("tierd_bucket_up is not 0 with the bucket's directory gone")
	}
	passes := metricNumber(t, httpAddr, "tierd_copier_passes_total")
	testtools.WaitFor(t, "three more passes (skipped)", func() bool { return metricNumber(t, httpAddr, "tierd_copier_passes_total") >= passes+3 })
	s := statusJSON(t, cfgPath)
	if p := s.Partitions[0]; p.DamagedCopies != 0 || p.Reason != remotelog.WaitStoreUnreachable {
		t.Fatalf("with the bucket's directory gone: %+v, want waiting store_unreachable with no damaged copy", p)
	}
	if _, err := os.Stat(bucket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the bucket's directory was recreated: %v", err)
	}
	if err := os.Rename(bucket+".away", bucket); err != nil {
		t.Fatal(err)
	}
	testtools.WaitFor(t, "ready again", func() bool { code, _ := readyAnswer(t, httpAddr); return code == http.StatusOK })
	passes2 := statusJSON(t, cfgPath).Passes
	testtools.WaitFor(t, "two more passes", func() bool { return statusJSON(t, cfgPath).Passes >= passes2+2 })
	if p := statusJSON(t, cfgPath).Partitions[0]; p.DamagedCopies != 0 || p.State != remotelog.TierUpToDate {
		t.Fatalf("after the directory returned: %+v, want up to date with no damaged copy", p)
	}
	if m := get(t, "http://"+httpAddr+"/metrics"); !strings.Contains(m, "\ntierd_copier_damaged_copies_total 0\n") {
		t.Fatalf("damaged copies counted:\n%s", lineWith(m, "damaged_copies_total"))
	}
	code, o, _ := runCmd("segments", "--config", cfgPath)
	if code != 0 || strings.Contains(o, "damaged") {
		t.Fatalf("segments: exit %d\n%s", code, o)
	}
}

// TestRunRefusesMissingBucketDir: "tierd run" never creates a missing
// filesystem bucket directory (an unmounted mount point would send the
// copies to the root filesystem): it stops with one line naming the
// directory and "tierd bucket create --config" (the last line of its log,
// "tierd stopped").
func TestRunRefusesMissingBucketDir(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	bucket := filepath.Join(root, "mnt", "bucket")
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+bucket, freeAddr(t), "")
	if err := os.RemoveAll(filepath.Join(root, "mnt")); err != nil {
		t.Fatal(err)
	}
	code, stderr := runBounded(t, "run", "--config", cfgPath)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if last := lines[len(lines)-1]; code != 1 || !strings.Contains(last, "tierd stopped") || !strings.Contains(last, bucket+" does not exist") ||
		!strings.Contains(last, "tierd bucket create --config") {
		t.Fatalf("exit %d, stderr %q: want one line naming %s and tierd bucket create", code, stderr, bucket)
	}
	if _, err := os.Stat(bucket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("tierd run created the bucket's directory: %v", err)
	}
	if code, o, e := runCmd("bucket", "create", "--config", cfgPath); code != 0 || !strings.Contains(o, "created filesystem bucket "+bucket) {
		t.Fatalf("bucket create: exit %d\n%s\n%s", code, o, e)
	}
}
