package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
	"github.com/tierd/tierd/rsm/rsmtest"
)

const rsmCrashToken = "token-of-the-rsm-crash-test-0123456789"

// rsmCrashRig is a tierd child process serving the RSM endpoint over
// MinIO (reached through a fault proxy), killed and restarted.
type rsmCrashRig struct {
	t                    *testing.T
	bin, cfg, root       string
	rsmAddr, seg         string
	srv                  *rsmtest.MinIOServer
	proxy                *rsmtest.FaultProxy
	direct               *miniogo.Core
	log                  []byte // the broker's .log of orders-0 segment 0
	end                  int64
	proc                 *exec.Cmd
	procDone             chan error
	logPath              string
	bucket, brokerPrefix string
}

// bigLog is string-key-0's real batches repeated reps times, each
// repetition's base offsets moved past the last (the base offset is
// outside a batch's CRC): a .log of several multipart parts.
func bigLog(t *testing.T, reps int) ([]byte, int64) {
	t.Helper()
	src, err := os.ReadFile(testfixtures.Path(t, "iechenyb-2019-plain", "kafka-logs", "string-key-0", kafkalog.FileName(0, kafkalog.LogSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	const shift = 28162
	var out bytes.Buffer
	for rep := range reps {
		sc := batch.NewScanner(bytes.NewReader(src), int64(len(src)), batch.ScanOptions{})
		for sc.Next() {
			raw, err := sc.Raw()
			if err != nil {
				t.Fatal(err)
			}
			binary.BigEndian.PutUint64(raw[0:8], uint64(sc.Batch().BaseOffset+int64(rep)*shift))
			out.Write(raw)
		}
	}
	return out.Bytes(), int64(reps)*shift - 1
}

func newRSMCrashRig(t *testing.T, rsmExtra ...string) *rsmCrashRig {
	root := t.TempDir()
	r := &rsmCrashRig{t: t, root: root, bin: buildTierd(t), rsmAddr: freePort(t), bucket: "rsmcrash", brokerPrefix: "p/_kafka-rsm"}
	r.srv = rsmtest.StartMinIO(t)
	r.srv.CreateBucket(t, r.bucket)
	r.proxy = rsmtest.StartFaultProxy(t, r.srv.Endpoint)
	var err error
	if r.direct, err = miniogo.NewCore(r.srv.Endpoint, &miniogo.Options{Creds: credentials.NewStaticV4(rsmtest.AccessKey, rsmtest.SecretKey, "")}); err != nil {
		t.Fatal(err)
	}
	r.seg = filepath.Join(root, "kafka-data", "orders-0")
	os.MkdirAll(r.seg, 0o755)
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	r.log, r.end = bigLog(t, 6)
	os.WriteFile(filepath.Join(r.seg, kafkalog.FileName(0, kafkalog.LogSuffix)), r.log, 0o644)
	os.WriteFile(filepath.Join(r.seg, kafkalog.FileName(0, kafkalog.IndexSuffix)), nil, 0o644)
	os.WriteFile(filepath.Join(r.seg, kafkalog.FileName(0, kafkalog.TimeIndexSuffix)), nil, 0o644)
	os.WriteFile(filepath.Join(r.seg, "leader-epoch-checkpoint"), []byte("0\n1\n0 0\n"), 0o644)
	os.WriteFile(filepath.Join(root, "rsm.token"), []byte(rsmCrashToken), 0o600)
	y := fmt.Sprintf(`copier:
  log_dirs: [%s]
  ownership_lease: 0
bucket:
  type: minio
  prefix: p
  minio:
    endpoint: http://%s
    bucket: %s
    part_size: 5242880
    part_concurrency: 1
    max_retries: 1
metadata:
  dir: %s
fetch:
  listen: %s
http:
  listen: %s
rsm:
  enabled: true
  listen: %s
  token_file: %s
  log_dirs: [%s]
  request_timeout: 10s
%s`, filepath.Join(root, "logs"), r.proxy.Endpoint, r.bucket, filepath.Join(root, "metadata"), freePort(t), freePort(t), r.rsmAddr,
		filepath.Join(root, "rsm.token"), filepath.Join(root, "kafka-data"), strings.Join(rsmExtra, ""))
	r.cfg = filepath.Join(root, "tierd.yaml")
	os.WriteFile(r.cfg, []byte(y), 0o644)
	r.logPath = filepath.Join(root, "tierd.log")
	return r
}

func (r *rsmCrashRig) start(crashpoint string) {
	r.t.Helper()
	r.proc, r.procDone = startTierd(r.t, r.bin, r.cfg, r.logPath, crashpoint)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, _ := r.call(http.MethodGet, "/v1/health", nil); code == http.StatusOK {
			return
		}
		select {
		case err := <-r.procDone:
			r.t.Fatalf("tierd exited at start: %v\n%s", err, r.logs())
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the RSM endpoint never answered\n%s", r.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *rsmCrashRig) logs() string {
	b, _ := os.ReadFile(r.logPath)
	return string(b)
}

func (r *rsmCrashRig) call(method, path string, body io.Reader) (int, string) {
	req, _ := http.NewRequest(method, "http://"+r.rsmAddr+path, body)
	req.Header.Set("Authorization", "Bearer "+rsmCrashToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *rsmCrashRig) copyPath(id remotelog.SegmentID) string {
	return fmt.Sprintf("/v1/segments/orders/0/0/%s", id)
}

func (r *rsmCrashRig) copyBody() io.Reader {
	q := map[string]any{"topicId": "B3_HiNPgSQ6oxG9ZZ6ED5A", "endOffset": r.end, "segmentSizeInBytes": len(r.log),
		"segmentLeaderEpochs":   []map[string]int{{"epoch": 0, "startOffset": 0}},
		"logSegment":            filepath.Join(r.seg, kafkalog.FileName(0, kafkalog.LogSuffix)),
		"offsetIndex":           filepath.Join(r.seg, kafkalog.FileName(0, kafkalog.IndexSuffix)),
		"timeIndex":             filepath.Join(r.seg, kafkalog.FileName(0, kafkalog.TimeIndexSuffix)),
		"leaderEpochCheckpoint": base64.StdEncoding.EncodeToString([]byte("0\n1\n0 0\n"))}
	b, _ := json.Marshal(q)
	return bytes.NewReader(b)
}

// keysOf lists the objects of copy id, and its incomplete uploads by
// exact key (MinIO's wider listings miss those a restart cut off).
func (r *rsmCrashRig) keysOf(id remotelog.SegmentID) (objects, uploads []string) {
	r.t.Helper()
	ctx := context.Background()
	res, err := r.direct.ListObjectsV2(r.bucket, r.brokerPrefix+"/orders-0/", "", "", "", 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, o := range res.Contents {
		if strings.Contains(o.Key, id.String()) {
			objects = append(objects, o.Key)
		}
	}
	for _, suffix := range []string{".log", ".index", ".timeindex", ".leader-epoch-checkpoint", ".manifest.json"} {
		key := fmt.Sprintf("%s/orders-0/%020d-%s%s", r.brokerPrefix, 0, id, suffix)
		ups, err := r.direct.ListMultipartUploads(ctx, r.bucket, key, "", "", "", 100)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, u := range ups.Uploads {
			if u.Key == key {
				uploads = append(uploads, key)
			}
		}
	}
	return objects, uploads
}

// keptAfterRestart checks, on a restarted tierd, that copy id (finished
// in its rows before a kill cut the broker's answer off) stays finished,
// whole and readable once tierd serves (its start-up clean-up has run),
// and then deletes it as the broker's deleteLogSegmentData would.
func (r *rsmCrashRig) keptAfterRestart(id remotelog.SegmentID) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := r.call(http.MethodGet, "/v1/health", nil); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("restarted tierd not healthy\n%s", r.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // passes of the start-up clean-up, if it were to take the copy
	if objects, _ := r.keysOf(id); len(objects) != 5 || r.rowState(id) != "COPY_SEGMENT_FINISHED" {
		r.t.Fatalf("a copy finished before the kill, after the restart: objects %v, row %s", objects, r.rowState(id))
	}
	if code, body := r.call(http.MethodGet, r.copyPath(id)+"/log", nil); code != http.StatusOK || body != string(r.log) {
		r.t.Fatalf("a copy finished before the kill reads back: %d, %d bytes", code, len(body))
	}
	if code, body := r.call(http.MethodDelete, r.copyPath(id), nil); code/100 != 2 {
		r.t.Fatalf("delete: %d %s", code, body)
	}
}

// rowState asks the running tierd for the row of copy id.
func (r *rsmCrashRig) rowState(id remotelog.SegmentID) string {
	code, body := r.call(http.MethodGet, "/v1/segments/orders/0", nil)
	if code != http.StatusOK {
		return fmt.Sprintf("(%d %s)", code, body)
	}
	var a struct{ Rows []remotelog.SegmentMetadata }
	json.Unmarshal([]byte(body), &a)
	for _, row := range a.Rows {
		if row.ID == id {
			return row.State.String()
		}
	}
	return "(no row)"
}

// TestRSMKilledDuringCopy: tierd killed during a copy, at each of its
// steps (row written, objects uploaded but the row not finished, and in
// the middle of the .log's multipart upload), leaves objects and an
// incomplete upload behind; restarted, it deletes them, logging the
// proof, and marks the row DELETE_SEGMENT_FINISHED, while a copy it
// finished stays readable. Killed after the row was marked finished but
// before the broker had its answer (rsm-copy.finished), it keeps the copy
// through the restart (the broker's own metadata decides about it: it
// deletes it with deleteLogSegmentData), readable until then.
func TestRSMKilledDuringCopy(t *testing.T) {
	r := newRSMCrashRig(t)
	r.start("")
	kept := remotelog.NewSegmentID()
	if code, body := r.call(http.MethodPut, r.copyPath(kept), r.copyBody()); code != http.StatusOK {
		t.Fatalf("copy: %d %s", code, body)
	}
	r.proc.Process.Signal(syscall.SIGTERM)
	<-r.procDone

	for _, kill := range []string{"rsm-copy.started", "rsm-copy.uploaded", "rsm-copy.finished", "mid-upload"} {
		t.Run(kill, func(t *testing.T) {
			id := remotelog.NewSegmentID()
			logKey := fmt.Sprintf("%s/orders-0/%020d-%s.log", r.brokerPrefix, 0, id)
			if kill == "mid-upload" {
				r.start("")
				stalled := make(chan struct{}, 1)
				r.proxy.SetRule(func(req *http.Request) rsmtest.Fault {
					if req.Method == http.MethodPut && req.URL.Query().Get("partNumber") == "2" && strings.HasSuffix(req.URL.Path, "/"+logKey) {
						select {
						case stalled <- struct{}{}:
						default:
						}
						return rsmtest.Stall
					}
					return rsmtest.Pass
				})
				go r.call(http.MethodPut, r.copyPath(id), r.copyBody())
				<-stalled // the first part is stored, the second on its way
				r.proc.Process.Signal(syscall.SIGKILL)
				<-r.procDone
				r.proxy.SetRule(nil)
			} else {
				r.start(kill)
				code, body := r.call(http.MethodPut, r.copyPath(id), r.copyBody())
				if code != 0 {
					t.Fatalf("a copy at crash point %s was answered: %d %s", kill, code, body)
				}
				<-r.procDone
			}
			objects, uploads := r.keysOf(id)
			switch kill {
			case "rsm-copy.uploaded", "rsm-copy.finished":
				if len(objects) != 5 {
					t.Fatalf("objects left by a kill after the upload: %v; want all five", objects)
				}
			case "mid-upload":
				if len(uploads) != 1 {
					t.Fatalf("incomplete uploads left by a kill mid-upload: %v; want the .log's", uploads)
				}
			}
			r.start("")
			if kill == "rsm-copy.finished" {
				r.keptAfterRestart(id)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				objects, uploads = r.keysOf(id)
				if len(objects) == 0 && len(uploads) == 0 && r.rowState(id) == "DELETE_SEGMENT_FINISHED" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the restart: objects %v, uploads %v, row %s\n%s", objects, uploads, r.rowState(id), r.logs())
				}
				time.Sleep(50 * time.Millisecond)
			}
			if kill != "rsm-copy.finished" && !strings.Contains(r.logs(), "COPY_SEGMENT_STARTED when tierd started") {
				t.Errorf("the delete's proof is not in the log")
			}
			if code, body := r.call(http.MethodGet, r.copyPath(kept)+"/log", nil); code != http.StatusOK || body != string(r.log) {
				t.Errorf("the finished copy after the restart: %d, %d bytes", code, len(body))
			}
			r.proc.Process.Signal(syscall.SIGTERM)
			<-r.procDone
		})
	}
}
