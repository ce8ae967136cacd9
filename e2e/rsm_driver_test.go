package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
	"github.com/tierd/tierd/rsm/rsmtest"
)

var (
	driverOnce sync.Once
	driverErr  error
)

// buildDriver builds the plugin, its broker-order driver and the API
// stand-ins into bin/ (kafka-rsm/build.sh driver). Without a JDK the test
// is skipped, or fails when $CI is set.
func buildDriver(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("javac"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("javac not found; CI requires a JDK (see .ci/run)")
		}
		t.Skip("javac not found: install a JDK to run the plugin against tierd")
	}
	driverOnce.Do(func() {
		cmd := exec.Command("kafka-rsm/build.sh", "driver")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			driverErr = fmt.Errorf("kafka-rsm/build.sh driver: %v\n%s", err, out)
		}
	})
	if driverErr != nil {
		t.Fatal(driverErr)
	}
}

// driver runs the broker-order driver against the rig's tierd with the
// API stand-ins stubs (kafka-rsm-api-stubs.jar: Kafka 4.2+;
// kafka-rsm-api-stubs-legacy.jar: 3.6-4.1) and returns its output and
// exit status.
func (r *rsmCrashRig) driver(t *testing.T, stubs, command, dir string, args ...string) (string, int) {
	t.Helper()
	bin := filepath.Join("..", "bin")
	cp := strings.Join([]string{filepath.Join(bin, stubs), filepath.Join(bin, "tierd-kafka-rsm.jar"), filepath.Join(bin, "tierd-kafka-rsm-driver.jar")}, ":")
	full := append([]string{"-cp", cp, "io.tierd.kafka.driver.BrokerDriver", command, "--endpoint", "http://" + r.rsmAddr,
		"--token-file", filepath.Join(r.root, "rsm.token"), "--dir", dir, "--topic-id", "B3_HiNPgSQ6oxG9ZZ6ED5A"}, args...)
	out, err := exec.Command("java", full...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// partition lays a real broker partition directory of the fixtures out in
// the broker's log dir as <name>.
func (r *rsmCrashRig) partition(t *testing.T, fixture, name string) string {
	t.Helper()
	dst := filepath.Join(r.root, "kafka-data", name)
	os.MkdirAll(dst, 0o755)
	src := testfixtures.Path(t, fixture)
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if _, ok := kafkalog.ParseFileName(e.Name()); !ok && e.Name() != "leader-epoch-checkpoint" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}

// TestPluginAgainstTierd: the Java plugin, driven in the broker's call
// order, against a real tierd on real MinIO: the lifecycle of real broker
// segments by path and by upload, with Kafka 4.2+'s and 3.6-4.1's API on
// the class path; 32 concurrent copies and reads; MinIO stopped during a
// copy (retriable, and nothing left after the broker's delete of the
// attempt); a corrupt segment (an error naming the byte, nothing stored).
func TestPluginAgainstTierd(t *testing.T) {
	t.Parallel()
	buildDriver(t)
	r := newRSMCrashRig(t, "  max_concurrent_copies: 32\n")
	consumer := r.partition(t, "ldi-kafka370-kraft/__consumer_offsets-6", "orders-1")
	small := r.partition(t, "sharaweil-kafka0110/data/test0-0", "orders-2")
	r.start("")
	for _, tc := range []struct {
		name, stubs, dir string
		args             []string
	}{
		{"path, 4.2+", "kafka-rsm-api-stubs.jar", consumer, nil},
		{"path, 3.6-4.1", "kafka-rsm-api-stubs-legacy.jar", small, nil},
		{"upload", "kafka-rsm-api-stubs.jar", consumer, []string{"--set", "tierd.copy.mode=upload"}},
		{"the big segment", "kafka-rsm-api-stubs.jar", r.seg, nil},
	} {
		out, code := r.driver(t, tc.stubs, "lifecycle", tc.dir, append([]string{"--all"}, tc.args...)...)
		if code != 0 || strings.Contains(out, "FAIL") {
			t.Errorf("lifecycle %s: exit %d\n%s", tc.name, code, out)
		}
	}
	if out, code := r.driver(t, "kafka-rsm-api-stubs.jar", "concurrent", consumer, "--all", "--threads", "32"); code != 0 {
		t.Errorf("32 concurrent lifecycles: exit %d\n%s", code, out)
	}

	// MinIO stops while the big segment's .log goes up in parts.
	id := remotelog.NewSegmentID()
	logKey := fmt.Sprintf("%s/orders-0/%020d-%s.log", r.brokerPrefix, 0, id)
	r.proxy.SetRule(func(req *http.Request) rsmtest.Fault {
		if req.Method == http.MethodPut && req.URL.Query().Get("partNumber") == "2" && strings.HasSuffix(req.URL.Path, "/"+logKey) {
			r.srv.Stop()
			return rsmtest.Reset
		}
		return rsmtest.Pass
	})
	out, code := r.driver(t, "kafka-rsm-api-stubs.jar", "copy", r.seg, "--base", "0", "--segment-id", id.String(), "--expect", "retriable")
	r.proxy.SetRule(nil)
	if code != 0 {
		t.Errorf("copy while MinIO stops: exit %d\n%s", code, out)
	}
	r.srv.Restart(t)
	if out, code := r.driver(t, "kafka-rsm-api-stubs.jar", "delete", r.seg, "--base", "0", "--segment-id", id.String(), "--expect", "ok"); code != 0 {
		t.Errorf("the broker's delete of the attempt: exit %d\n%s", code, out)
	}
	if objects, uploads := r.keysOf(id); len(objects) != 0 || len(uploads) != 0 {
		t.Errorf("left after the delete: objects %v, uploads %v", objects, uploads)
	}

	// A corrupt segment: an error naming the byte, nothing stored.
	bad := r.partition(t, "sharaweil-kafka0110/data/test0-1", "orders-3")
	logPath := filepath.Join(bad, kafkalog.FileName(0, kafkalog.LogSuffix))
	data, _ := os.ReadFile(logPath)
	data[len(data)/2] ^= 0xff
	os.WriteFile(logPath, data, 0o644)
	cid := remotelog.NewSegmentID()
	out, code = r.driver(t, "kafka-rsm-api-stubs.jar", "copy", bad, "--base", "0", "--segment-id", cid.String(), "--expect", "error",
		"--expect-message", "corrupt data at byte")
	if code != 0 {
		t.Errorf("copy of a corrupt segment: exit %d\n%s", code, out)
	}
	if code, body := r.call(http.MethodGet, "/v1/segments/orders/3", nil); code != http.StatusOK || strings.Contains(body, cid.String()) {
		t.Errorf("rows after the corrupt copy: %d %s; want none for it", code, body)
	}
	r.proc.Process.Signal(syscall.SIGTERM)
	<-r.procDone
}
