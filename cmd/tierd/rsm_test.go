package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	testcerts "github.com/tierd/tierd/internal/testutil/certs"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm/rsmtest"
)

const rsmTestToken = "token-of-the-rsm-wiring-test-0123456789"

// rsmWorld is a tierd config with the RSM endpoint on, its own copier log
// dir, a broker log dir holding a real broker segment, and MinIO.
type rsmWorld struct {
	root, cfgPath             string
	fetch, http, rsm          string
	brokerDir, copierDir, tok string
	seg                       string // the broker's partition dir (orders-0)
}

func newRSMWorld(t *testing.T, srv *rsmtest.MinIOServer, bucket string) *rsmWorld {
	t.Helper()
	root := t.TempDir()
	w := &rsmWorld{root: root, fetch: freeAddr(t), http: freeAddr(t), rsm: freeAddr(t), brokerDir: filepath.Join(root, "kafka-data"),
		copierDir: filepath.Join(root, "logs"), tok: filepath.Join(root, "rsm.token")}
	w.seg = filepath.Join(w.brokerDir, "orders-0")
	os.MkdirAll(w.seg, 0o755)
	os.MkdirAll(filepath.Join(w.copierDir, "sidecar-0"), 0o755) // a topic tierd's copier tiers
	src := testfixtures.Path(t, "ldi-kafka370-kraft", "__consumer_offsets-6")
	for _, f := range []string{kafkalog.FileName(0, kafkalog.LogSuffix), kafkalog.FileName(0, kafkalog.IndexSuffix),
		kafkalog.FileName(0, kafkalog.TimeIndexSuffix), kafkalog.FileName(13, kafkalog.SnapshotSuffix), "leader-epoch-checkpoint"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(w.seg, f), b, 0o644)
	}
	os.WriteFile(w.tok, []byte(rsmTestToken+"\n"), 0o600)
	y := fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
  remote.log.manager.task.interval.ms: 100
bucket:
  type: minio
  minio:
    endpoint: http://%s
    bucket: %s
metadata:
  dir: %s
fetch:
  listen: %s
http:
  listen: "%s"
rsm:
  enabled: true
  listen: %s
  token_file: %s
  log_dirs: [%s]
`, w.copierDir, srv.Endpoint, bucket, filepath.Join(root, "metadata"), w.fetch, w.http, w.rsm, w.tok, w.brokerDir)
	w.cfgPath = filepath.Join(root, "tierd.yaml")
	if err := os.WriteFile(w.cfgPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// copyReq sends the broker's copy of orders-0's segment 0 as a new
// attempt (segment id), for topic (the partition dir is orders-0's).
func (w *rsmWorld) copyReq(t *testing.T, topic string, id remotelog.SegmentID) (int, string) {
	t.Helper()
	cp, _ := os.ReadFile(filepath.Join(w.seg, "leader-epoch-checkpoint"))
	st, _ := os.Stat(filepath.Join(w.seg, kafkalog.FileName(0, kafkalog.LogSuffix)))
	q := map[string]any{"topicId": "B3_HiNPgSQ6oxG9ZZ6ED5A", "endOffset": 12, "segmentSizeInBytes": st.Size(),
		"segmentLeaderEpochs": []map[string]int{{"epoch": 0, "startOffset": 0}}, "brokerId": 1,
		"logSegment": filepath.Join(w.seg, kafkalog.FileName(0, kafkalog.LogSuffix)), "offsetIndex": filepath.Join(w.seg, kafkalog.FileName(0, kafkalog.IndexSuffix)),
		"timeIndex": filepath.Join(w.seg, kafkalog.FileName(0, kafkalog.TimeIndexSuffix)), "producerSnapshot": filepath.Join(w.seg, kafkalog.FileName(13, kafkalog.SnapshotSuffix)),
		"leaderEpochCheckpoint": base64.StdEncoding.EncodeToString(cp)}
	if topic != "orders" {
		q["logSegment"] = strings.Replace(q["logSegment"].(string), "orders-0", topic+"-0", 1)
	}
	b, _ := json.Marshal(q)
	return w.call(t, http.MethodPut, fmt.Sprintf("/v1/segments/%s/0/0/%s", topic, id), bytes.NewReader(b))
}

func (w *rsmWorld) call(t *testing.T, method, path string, body io.Reader) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+w.rsm+path, body)
	req.Header.Set("Authorization", "Bearer "+rsmTestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// up reports whether the RSM endpoint answers its health check (it starts
// listening a moment after tierd's HTTP server).
func (w *rsmWorld) up() bool {
	req, _ := http.NewRequest(http.MethodGet, "http://"+w.rsm+"/v1/health", nil)
	req.Header.Set("Authorization", "Bearer "+rsmTestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestRSMEndpointWired: tierd run serves the RSM endpoint beside its own
// copier; a broker's copy through it shows in the metrics, tierd status,
// the status page, tierd segments (running and stopped) and tierd
// verify; a topic tierd's copier tiers is refused 409.
func TestRSMEndpointWired(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "wired")
	w := newRSMWorld(t, srv, "wired")
	stop := startServe(t, w.cfgPath)
	testtools.WaitFor(t, "tierd serving", func() bool { return healthy(w.http) })
	testtools.WaitFor(t, "the RSM endpoint", func() bool { return w.up() })
	id := remotelog.NewSegmentID()
	if code, body := w.copyReq(t, "orders", id); code != http.StatusOK {
		t.Fatalf("copy: %d %s", code, body)
	}
	// Reads go through tierd's chunk cache: the second read of the same
	// bytes asks nothing of the store.
	logFile, _ := os.ReadFile(filepath.Join(w.seg, kafkalog.FileName(0, kafkalog.LogSuffix)))
	readLog := func() string {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/v1/segments/orders/0/0/%s/log", w.rsm, id), nil)
		req.Header.Set("Authorization", "Bearer "+rsmTestToken)
		req.Header.Set("Range", "bytes=0-")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusPartialContent {
			t.Fatalf("read: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	gets0 := metricNumber(t, w.http, "tierd_fetch_log_gets_total")
	if got := readLog(); got != string(logFile) {
		t.Fatalf("cold read: %d bytes, not the segment's %d", len(got), len(logFile))
	}
	gets1 := metricNumber(t, w.http, "tierd_fetch_log_gets_total")
	if got := readLog(); got != string(logFile) {
		t.Fatalf("warm read: %d bytes, not the segment's %d", len(got), len(logFile))
	}
	if gets2 := metricNumber(t, w.http, "tierd_fetch_log_gets_total"); gets1 <= gets0 || gets2 != gets1 {
		t.Errorf("ranged GETs of .log objects: %v before, %v after a cold read, %v after a warm one; want the cold read to make them and the warm none", gets0, gets1, gets2)
	}
	if code, body := w.copyReq(t, "sidecar", remotelog.NewSegmentID()); code != http.StatusConflict || !strings.Contains(body, "TIERED_BY_SIDECAR") {
		t.Errorf("copy of a topic in copier.log_dirs: %d %s; want 409 TIERED_BY_SIDECAR", code, body)
	}
	metrics := get(t, "http://"+w.http+"/metrics")
	logBytes, _ := os.Stat(filepath.Join(w.seg, kafkalog.FileName(0, kafkalog.LogSuffix)))
	for _, want := range []string{fmt.Sprintf(`tierd_rsm_copy_bytes_total{partition="0",topic="orders"} %d`, logBytes.Size()),
		`tierd_rsm_copy_requests_total{partition="0",topic="sidecar"} 1`, `tierd_rsm_copy_errors_total{partition="0",topic="sidecar"} 1`,
		"# TYPE tierd_rsm_request_duration_seconds histogram", `tierd_rsm_auth_failures_total{reason="wrong"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if page := get(t, "http://"+w.http+"/"); !strings.Contains(page, "Broker-owned copies") || !strings.Contains(page, `data-partition="orders-0"`) {
		t.Errorf("the status page lacks the broker-owned copies")
	}
	code, out, errOut := runCmd("status", "--config", w.cfgPath)
	if code != 0 || !strings.Contains(out, "broker-owned copies (RSM endpoint http://"+w.rsm) || !strings.Contains(out, "1 copy stored") ||
		!strings.Contains(out, "orders-0: 1 copy") {
		t.Errorf("tierd status: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd("segments", "--config", w.cfgPath)
	if code != 0 || !strings.Contains(out, "orders-0 (broker's): 1 copy stored") || !strings.Contains(out, id.String()) || !strings.Contains(out, "the RSM endpoint at") {
		t.Errorf("tierd segments: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd("verify", "--config", w.cfgPath)
	if code != 0 || !strings.Contains(out, "1 ok") || !strings.Contains(errOut, "1 of them broker-owned") {
		t.Errorf("tierd verify: exit %d\n%s%s", code, out, errOut)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd("segments", "--config", w.cfgPath)
	if code != 0 || !strings.Contains(out, "orders-0 (broker's): 1 copy stored") || !strings.Contains(out, "(tierd not running)") {
		t.Errorf("tierd segments of a stopped tierd: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd("status", "--config", w.cfgPath)
	if !strings.Contains(out, "1 copy stored") || !strings.Contains(out, "(tierd not running)") {
		t.Errorf("tierd status of a stopped tierd: exit %d\n%s%s", code, out, errOut)
	}
}

// TestRSMRefusals: tierd refuses at load rsm.log_dirs overlapping
// copier.log_dirs, and at start a topic with both broker-owned copies and
// tierd's own.
func TestRSMRefusals(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "refused")
	w := newRSMWorld(t, srv, "refused")
	data, _ := os.ReadFile(w.cfgPath)
	overlap := strings.Replace(string(data), "log_dirs: ["+w.brokerDir+"]", "log_dirs: ["+w.copierDir+"/sub]", 1)
	p := filepath.Join(w.root, "overlap.yaml")
	os.WriteFile(p, []byte(overlap), 0o644)
	if _, err := config.Load(p); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("rsm.log_dirs inside copier.log_dirs: %v; want a refusal", err)
	}

	store, err := rlmm.Open(rlmm.Config{Dir: filepath.Join(w.root, "metadata")})
	if err != nil {
		t.Fatal(err)
	}
	tp := remotelog.TopicPartition{Topic: "orders", Partition: 1}
	if err := store.EnsurePartition(tp, 0); err != nil {
		t.Fatal(err)
	}
	if err := store.PutBrokerCopy(remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "orders", Partition: 0},
		ID: remotelog.NewSegmentID(), EndOffset: 10, State: remotelog.CopySegmentFinished}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	cfg, err := config.Load(w.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := serve(ctx, cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "tiered one way only") {
		t.Errorf("serve with topic orders tiered both ways: %v; want a refusal", err)
	}
}

// TestReadmeRSMMetricsFromStart: a tierd serving the RSM endpoint exposes
// every metric of docs/kafka.md's table of the endpoint's metrics before any
// call, so that alerts and absent() work from the start.
func TestReadmeRSMMetricsFromStart(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	os.MkdirAll(filepath.Join(root, "kafka-data"), 0o755)
	tok := filepath.Join(root, "rsm.token")
	os.WriteFile(tok, []byte(rsmTestToken), 0o600)
	httpAddr, rsmAddr := freeAddr(t), freeAddr(t)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), httpAddr)
	data, _ := os.ReadFile(cfgPath)
	data = append(data, fmt.Sprintf("rsm:\n  enabled: true\n  listen: %s\n  token_file: %s\n  log_dirs: [%s]\n", rsmAddr, tok, filepath.Join(root, "kafka-data"))...)
	os.WriteFile(cfgPath, data, 0o644)
	startServe(t, cfgPath)
	testtools.WaitFor(t, "tierd serving", func() bool { return healthy(httpAddr) })
	metrics := get(t, "http://"+httpAddr+"/metrics")
	names := docTableMetrics(t, "docs/kafka.md", "Metrics of the RSM endpoint")
	if len(names) < 10 {
		t.Fatalf("docs/kafka.md's table names only %v", names)
	}
	for _, name := range names {
		if !strings.Contains(metrics, "\n# TYPE "+name+" ") {
			t.Errorf("%s (in docs/kafka.md's table) is not on /metrics at start", name)
		}
	}
	if !strings.Contains(metrics, `tierd_rsm_copy_errors_total{partition="-1",topic="_other"} 0`) {
		t.Error("the per-partition counters do not exist from start under the aggregate labels")
	}
}

// TestRSMOverMTLS: with tls.rsm: mtls the endpoint presents tierd's
// certificate and refuses a client without one of the client CA; the
// plugin's calls and tierd's own tools (tierd status, with tls.ca_file
// and tls.client_cert_file) get through.
func TestRSMOverMTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	srv, client := ca.Server(t, "rsm-server"), ca.Client(t, "broker")
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	os.MkdirAll(filepath.Join(root, "kafka-data"), 0o755)
	tok := filepath.Join(root, "rsm.token")
	os.WriteFile(tok, []byte(rsmTestToken), 0o600)
	httpAddr, rsmAddr := freeAddr(t), freeAddr(t)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), httpAddr)
	data, _ := os.ReadFile(cfgPath)
	data = append(data, fmt.Sprintf("rsm:\n  enabled: true\n  listen: %s\n  token_file: %s\n  log_dirs: [%s]\n"+
		"tls:\n  cert_file: %s\n  key_file: %s\n  client_ca_file: %s\n  rsm: mtls\n  ca_file: %s\n  client_cert_file: %s\n  client_key_file: %s\n",
		rsmAddr, tok, filepath.Join(root, "kafka-data"), srv.CertFile, srv.KeyFile, ca.CAFile, ca.CAFile, client.CertFile, client.KeyFile)...)
	os.WriteFile(cfgPath, data, 0o644)
	startServe(t, cfgPath)
	withCert, noCert := testcerts.ClientConfig(t, ca, client), testcerts.ClientConfig(t, ca, testcerts.Pair{})
	if cn, err := tlsPeer(t, rsmAddr, withCert); err != nil || cn != "rsm-server" {
		t.Errorf("the endpoint with a client certificate: %q, %v", cn, err)
	}
	if _, err := tlsPeer(t, rsmAddr, noCert); err == nil {
		t.Error("the endpoint accepted a client without a certificate")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: withCert}}
	testtools.WaitFor(t, "the endpoint ready over mTLS", func() bool {
		req, _ := http.NewRequest(http.MethodGet, "https://"+rsmAddr+"/v1/health", nil)
		req.Header.Set("Authorization", "Bearer "+rsmTestToken)
		resp, err := hc.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	code, out, errOut := runCmd("status", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "broker-owned copies (RSM endpoint https://"+rsmAddr) {
		t.Errorf("tierd status over mTLS: exit %d\n%s%s", code, out, errOut)
	}
}

// TestRSMTokenReloadOnSIGHUP: SIGHUP makes tierd run read rsm.token_file
// again: the new token is taken and the old one refused (that a file
// which cannot be used keeps the token in use: rsmapi's TestTokenReload).
func TestRSMTokenReloadOnSIGHUP(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	os.MkdirAll(filepath.Join(root, "kafka-data"), 0o755)
	tok := filepath.Join(root, "rsm.token")
	os.WriteFile(tok, []byte(rsmTestToken), 0o600)
	httpAddr, rsmAddr := freeAddr(t), freeAddr(t)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), httpAddr)
	data, _ := os.ReadFile(cfgPath)
	data = append(data, fmt.Sprintf("rsm:\n  enabled: true\n  listen: %s\n  token_file: %s\n  log_dirs: [%s]\n", rsmAddr, tok, filepath.Join(root, "kafka-data"))...)
	os.WriteFile(cfgPath, data, 0o644)
	startServe(t, cfgPath)
	health := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+rsmAddr+"/v1/health", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testtools.WaitFor(t, "the endpoint", func() bool { return health(rsmTestToken) == http.StatusOK })
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // so that the signal never ends the test binary
	defer signal.Stop(hup)
	const next = "the-rotated-token-0123456789abcdef"
	os.WriteFile(tok, []byte(next+"\n"), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	<-hup
	testtools.WaitFor(t, "the new token taken", func() bool { return health(next) == http.StatusOK })
	if code := health(rsmTestToken); code != http.StatusUnauthorized {
		t.Errorf("the old token after the reload: %d, want 401", code)
	}
}

// TestRSMOnlyConfig: a tierd that only serves a broker's RemoteStorageManager
// plugin needs no copier.log_dirs (nor a broker_id for leases it never
// takes); without the endpoint, copier.log_dirs stays required.
func TestRSMOnlyConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	common := "bucket:\n  type: minio\n  minio: {endpoint: http://127.0.0.1:9, bucket: b}\nmetadata: {dir: " + filepath.Join(dir, "meta") + "}\n"
	only := write("only.yaml", "rsm:\n  enabled: true\n  token_file: "+filepath.Join(dir, "token")+"\n  log_dirs: ["+dir+"]\n"+common)
	if _, err := config.Load(only); err != nil {
		t.Errorf("rsm.enabled without copier.log_dirs: %v; want it accepted", err)
	}
	neither := write("neither.yaml", common)
	if _, err := config.Load(neither); err == nil || !strings.Contains(err.Error(), "copier: log_dirs is required") {
		t.Errorf("neither copier.log_dirs nor rsm.enabled: %v; want copier.log_dirs required", err)
	}
}

// TestRSMOnlyTokenRotation: a tierd that serves only the RSM endpoint (no
// log dirs of its own) is found by "tierd config reload" through its
// metadata dir, and a new token written to the token file is in force
// once the reload returns: the new token is accepted, the old refused.
func TestRSMOnlyTokenRotation(t *testing.T) {
	hup := make(chan os.Signal, 8) // this process receives the SIGHUP
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "rotate")
	w := newRSMWorld(t, srv, "rotate")
	y, _ := os.ReadFile(w.cfgPath)
	only := regexp.MustCompile(`(?s)^copier:.*?\nbucket:`).ReplaceAllString(string(y), "bucket:")
	if only == string(y) {
		t.Fatal("no copier section to drop")
	}
	os.WriteFile(w.cfgPath, []byte(only), 0o644)
	startServe(t, w.cfgPath)
	status := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+w.rsm+"/v1/segments/orders/0", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testtools.WaitFor(t, "the RSM endpoint", func() bool { return status(rsmTestToken) == http.StatusOK })
	const fresh = "a-new-token-of-the-broker-0123456789"
	os.WriteFile(w.tok, []byte(fresh+"\n"), 0o600)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"config", "reload", "--config", w.cfgPath}, &out, &errOut); code != 0 {
		t.Fatalf("config reload of an RSM-only tierd: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if got := status(fresh); got != http.StatusOK {
		t.Errorf("the new token after the reload: %d", got)
	}
	if got := status(rsmTestToken); got != http.StatusUnauthorized {
		t.Errorf("the old token after the reload: %d, want 401", got)
	}
}
