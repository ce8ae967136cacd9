package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/seglog"
	"google.golang.org/protobuf/proto"
)

// tierdBuild is the one tierd binary the package's tests run, built on
// first use into a directory TestMain removes.
var tierdBuild struct {
	once     sync.Once
	dir, bin string
	err      error
}

// buildTierd returns the path of tierd built from ./cmd/tierd (once per
// test process; tests in parallel share it), failing the test when the
// build fails.
func buildTierd(t *testing.T) string {
	t.Helper()
	b := &tierdBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "tierd-e2e-bin-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "tierd")
		cmd := exec.Command("go", "build", "-o", b.bin, "./cmd/tierd")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build tierd: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// TestMain runs the tests and removes the tierd binary they built.
func TestMain(m *testing.M) {
	code := m.Run()
	if tierdBuild.dir != "" {
		os.RemoveAll(tierdBuild.dir)
	}
	os.Exit(code)
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// crashRig is one partition (topic, partition 0) written by this process
// with the embedded log, tiered by a tierd subprocess that gets killed and
// restarted.
type crashRig struct {
	t        *testing.T
	bin, cfg string
	root     string
	topic    string
	addr     string
	log      *seglog.Log
	client   *grpcapi.Client
	admin    *grpcapi.Client // on the admin socket; nil: not dialled
	direct   *minio.Bucket
	mgr      *rsm.Manager
	next     int64                  // the next offset appendSegment writes
	rolled   []kafkalog.SegmentFile // every segment this process rolled
	gone     []string               // topics whose deletion was ordered
	proc     *exec.Cmd
	procDone chan error
}

// startTierd starts "tierd run --config cfg" with TIERD_CRASHPOINT set to
// crashpoint ("": none), its output appended to logPath. done receives
// its exit once; the test's clean-up kills it if it still runs.
func startTierd(t *testing.T, bin, cfg, logPath, crashpoint string) (cmd *exec.Cmd, done chan error) {
	t.Helper()
	cmd = exec.Command(bin, "run", "--config", cfg)
	cmd.Env = append(os.Environ(), "TIERD_CRASHPOINT="+crashpoint)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	exited := make(chan struct{})
	go func() { err := cmd.Wait(); logf.Close(); done <- err; close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	})
	return cmd, done
}

// start starts the daemon, to kill itself at crashpoint ("": never).
func (r *crashRig) start(crashpoint string) {
	r.t.Helper()
	r.proc, r.procDone = startTierd(r.t, r.bin, r.cfg, filepath.Join(r.root, "tierd.log"), crashpoint)
}

// kill SIGKILLs the daemon (if it is still running) and waits for it.
func (r *crashRig) kill() {
	r.proc.Process.Signal(syscall.SIGKILL)
	<-r.procDone
}

// stop stops the daemon with SIGTERM and fails the test unless it exits
// cleanly.
func (r *crashRig) stop(round int) {
	r.t.Helper()
	r.proc.Process.Signal(syscall.SIGTERM)
	if err := <-r.procDone; err != nil {
		r.t.Fatalf("round %d: clean stop: %v", round, err)
	}
}

// exited waits up to d for the daemon to exit on its own (a crash point).
func (r *crashRig) exited(d time.Duration) bool {
	select {
	case <-r.procDone:
		return true
	case <-time.After(d):
		return false
	}
}

// appendSegment writes n records (value(offset) each, 5000 bytes) and
// rolls them into a segment of their own.
func (r *crashRig) appendSegment(n int) {
	r.t.Helper()
	segs := r.log.Segments()
	r.rolled = append(r.rolled, kafkalog.SegmentFile{BaseOffset: segs[len(segs)-1].BaseOffset})
	for i := 0; i < n; i++ {
		if _, err := r.log.Append(seglog.Record{Value: value(r.next)}); err != nil {
			r.t.Fatal(err)
		}
		r.next++
	}
	if err := r.log.Roll(); err != nil {
		r.t.Fatal(err)
	}
}

// idle reports whether the daemon has tiered every rolled segment of the
// rig's partition, left only the active segment locally, no row in a
// STARTED state and (when the rig has the admin socket) no partition
// deletion pending; resp is the segment list it read (nil when the
// daemon did not answer).
func (r *crashRig) idle() (resp *tierdpb.ListSegmentsResponse, ok bool) {
	active := r.log.Segments()
	activeBase := active[len(active)-1].BaseOffset
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := r.client.API().ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: r.topic, Partition: 0})
	if err != nil {
		return nil, false
	}
	for _, s := range resp.Segments {
		if s.State == "COPY_SEGMENT_STARTED" || s.State == "DELETE_SEGMENT_STARTED" {
			return resp, false
		}
	}
	if r.admin != nil {
		if ds, err := r.admin.Admin().ListDeletions(ctx, &tierdpb.ListDeletionsRequest{}); err != nil || len(ds.GetDeletions()) > 0 {
			return resp, false
		}
	}
	return resp, resp.HighestTieredOffset == activeBase-1 && resp.LocalLogStartOffset == activeBase
}

var errExited = fmt.Errorf("exited")

// synced waits until the daemon is idle and its segment list stayed the
// same over 300 ms (fifteen passes at the rigs' 20 ms interval: local and
// remote retention and merges are done, and the checks read a log nobody
// changes meanwhile), or stop (nil: never) says to give up (errExited),
// or the deadline passes (an error with the last segment list read).
func (r *crashRig) synced(deadline time.Time, stop func() bool) (*tierdpb.ListSegmentsResponse, error) {
	var prev, last *tierdpb.ListSegmentsResponse
	var since time.Time
	for {
		if stop != nil && stop() {
			return nil, errExited
		}
		resp, ok := r.idle()
		if resp != nil {
			last = resp
		}
		if ok {
			if prev == nil || !proto.Equal(prev, resp) {
				prev, since = resp, time.Now()
			} else if time.Since(since) >= 300*time.Millisecond {
				return resp, nil
			}
		} else {
			prev = nil
		}
		if time.Now().After(deadline) {
			return last, fmt.Errorf("not synced in time: %v", last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitedOrIdle waits until the daemon exits (its crash point hit), or is
// synced (nothing left to do), or d passes; it reports whether it exited.
// during (nil: nothing) runs between the looks, while the daemon works.
func (r *crashRig) exitedOrIdle(d time.Duration, during func()) bool {
	_, err := r.synced(time.Now().Add(d), func() bool {
		if r.exited(20 * time.Millisecond) {
			return true
		}
		if during != nil {
			during()
		}
		return false
	})
	return err == errExited
}

// failRound stops a round that went wrong: the daemon killed, the test
// failed with what happened and the end of the daemon's log.
func (r *crashRig) failRound(round int, point string, err error) {
	r.t.Helper()
	r.kill()
	log, _ := os.ReadFile(filepath.Join(r.root, "tierd.log"))
	r.t.Fatalf("round %d (killed at %q): %v\n%s", round, point, err, tail(log, 3000))
}

// failedRound ends the test when a check of the round failed, with the
// end of the daemon's log.
func (r *crashRig) failedRound(round int, point string) {
	r.t.Helper()
	if r.t.Failed() {
		log, _ := os.ReadFile(filepath.Join(r.root, "tierd.log"))
		r.t.Fatalf("round %d (killed at %q)\n%s", round, point, tail(log, 3000))
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// newCrashRig starts MinIO with a bucket named topic, builds tierd and
// writes its config (TestCrash's retention, the rig's partition topic-0
// under logs/; extra, when not empty, is appended as top-level sections),
// opens the partition with the embedded log and dials the daemon's read
// API and admin socket. The test's clean-up closes them.
func newCrashRig(t *testing.T, topic, extra string) *crashRig {
	t.Helper()
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, topic)
	root := t.TempDir()
	r := &crashRig{t: t, root: root, topic: topic, bin: buildTierd(t), addr: freePort(t)}
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure, mcfg.PartSize = srv.Endpoint, topic, true, 5<<20
	var err error
	if r.direct, err = minio.New(mcfg, nil); err != nil {
		t.Fatal(err)
	}
	if r.mgr, err = rsm.NewManager(r.direct, rsm.Config{}); err != nil {
		t.Fatal(err)
	}
	r.cfg = filepath.Join(root, "tierd.yaml")
	if err := os.WriteFile(r.cfg, []byte(fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
  remote.log.manager.task.interval.ms: 20
  copy_timeout: 20s
  file.delete.delay.ms: 0
  remote.log.delete.delay.ms: 0
  log.local.retention.ms: 0
  log.retention.ms: -1
  log.retention.bytes: %d
  initial_retention_delay: 0s
bucket:
  type: minio
  minio: {endpoint: http://%s, bucket: %s, part_size: 5242880, part_concurrency: 1}
metadata: {dir: %s}
fetch: {listen: %s}
http: {listen: ""}
%s`, filepath.Join(root, "logs"), crashRetentionBytes, srv.Endpoint, topic, filepath.Join(root, "meta"), r.addr, extra)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r.client, err = grpcapi.Dial(r.addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.client.Close() })
	// The Admin service is on the admin socket (no tokens, no mtls).
	if r.admin, err = grpcapi.Dial("unix://" + filepath.Join(root, "meta", "admin", "tierd.sock")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.admin.Close() })
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = 64 << 20
	if r.log, err = seglog.Open(filepath.Join(root, "logs", topic+"-0"), scfg, seglog.WithRemote(r.client.Partition(topic, 0))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.log.Close() })
	return r
}
