package copier

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// TestLockHolder: the lock check sees the fcntl lock another process
// holds on a file, with its pid, and nothing once it is released; a
// missing file is held by nobody and is not created.
func TestLockHolder(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, BrokerLockFile)
	if held, pid, err := lockHolder(p); held || pid != -1 || err != nil {
		t.Fatalf("missing file: held %v pid %d err %v", held, pid, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("the check created %s: %v", p, err)
	}
	h := goHolder(t, p)
	if held, pid, err := lockHolder(p); !held || pid != h.pid || err != nil {
		t.Fatalf("held by pid %d: held %v pid %d err %v", h.pid, held, pid, err)
	}
	h.release(t)
	if held, _, err := lockHolder(p); held || err != nil {
		t.Fatalf("released: held %v err %v", held, err)
	}
	if os.Geteuid() != 0 { // root reads anything
		os.Chmod(p, 0)
		if _, _, err := lockHolder(p); err == nil {
			t.Error("an unreadable .lock gave no error: whether a broker runs cannot be told")
		}
		os.Chmod(p, 0o644)
	}
}

// TestLockHolderOwnProcess: F_GETLK never reports a POSIX lock of the
// asking process itself; the open file description form that the check
// tries first does. (Closing the check's descriptor then drops that lock:
// POSIX locks belong to the process, so tierd itself takes only open
// file description locks on a log dir's .lock: excludeBroker.)
func TestLockHolderOwnProcess(t *testing.T) {
	p := filepath.Join(t.TempDir(), BrokerLockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := wholeFileWriteLock()
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	probe, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	getlk := wholeFileWriteLock()
	if err := syscall.FcntlFlock(probe.Fd(), syscall.F_GETLK, &getlk); err != nil || getlk.Type != syscall.F_UNLCK {
		t.Fatalf("F_GETLK on this process's own lock: type %d err %v, want no conflict", getlk.Type, err)
	}
	probe.Close() // drops the lock: it was this process's
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	held, pid, err := lockHolder(p)
	if err != nil {
		t.Fatal(err)
	}
	if !held || pid != os.Getpid() {
		t.Errorf("own POSIX lock: held %v pid %d, want held by %d (F_OFD_GETLK)", held, pid, os.Getpid())
	}
}

// listing returns every file name under dir with its inode and size,
// tierd's staging folder aside: what a broker-owned dir must keep.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir() && info.Name() == StagingDir {
			return filepath.SkipDir
		}
		if !info.IsDir() {
			out = append(out, fmt.Sprintf("%s ino=%d size=%d", strings.TrimPrefix(p, dir), info.Sys().(*syscall.Stat_t).Ino, info.Size()))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// brokerRig is a rig over a Kafka-looking log dir (meta.properties) with
// three old rolled segments and an active one, local retention 0 and
// file.delete.delay.ms 0: anything tierd may delete goes at once.
func brokerRig(t *testing.T, setting *bool, b rsm.Bucket) *rig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BrokerOwned, cfg.FileDeleteDelayMs = setting, 0
	cfg.Retention.LocalRetentionMs = ptr(0)
	r := newRig(t, cfg, b)
	writeFile(t, filepath.Join(r.logDir, MetaPropertiesFile), "version=1\ncluster.id=test\nnode.id=0\n")
	old := r.now.UnixMilli() - 3_600_000
	for i := int64(0); i < 3; i++ {
		writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(old, 10), 10)
	}
	writeSegment(t, r.dir(), 30, nil, nil, 0)
	return r
}

// TestRunningBrokerKeepsItsFiles: a Kafka broker (a JVM holding the lock
// FileChannel.tryLock takes on <log.dir>/.lock, as Kafka's LogManager
// does) runs on the log dir, and tierd is configured broker_owned: false.
// tierd copies every rolled segment, renames and deletes nothing there,
// and says so (LogDirs, the partition's status, the metric). Once the
// broker is gone, the explicit broker_owned: false lets local retention
// resume.
func TestRunningBrokerKeepsItsFiles(t *testing.T) {
	r := brokerRig(t, yes(false), nil)
	broker := javaHolder(t, filepath.Join(r.logDir, BrokerLockFile))
	before := listing(t, r.logDir)
	if n := r.sync(); n != 3 {
		t.Fatalf("copied %d, want the 3 rolled segments", n)
	}
	if r.states()[remotelog.CopySegmentFinished] != 3 {
		t.Fatalf("rows %v", r.states())
	}
	if after := listing(t, r.logDir); !reflect.DeepEqual(after, before) {
		t.Fatalf("tierd changed a running broker's log dir:\nbefore %v\nafter  %v", before, after)
	}
	st := r.c.LogDirs()[0]
	if !st.Available || !st.Locked || st.LockPID != broker.pid || !st.BrokerOwned || !strings.Contains(st.Why, "broker_owned: false is overridden") {
		t.Fatalf("log dir state %+v, want locked by pid %d and broker-owned", st, broker.pid)
	}
	if d := r.status(r.tp).Detail; !strings.Contains(d, fmt.Sprintf("a running broker holds .lock (pid %d)", broker.pid)) {
		t.Errorf("status detail %q does not say a broker owns the files", d)
	}
	if g := gauge(t, r.c.m.dirBrokerOwned.WithLabelValues(r.logDir)); g != 1 {
		t.Errorf("tierd_copier_log_dir_broker_owned %v, want 1", g)
	}
	r.sync() // a second pass changes nothing either
	if after := listing(t, r.logDir); !reflect.DeepEqual(after, before) {
		t.Fatalf("second pass changed the log dir: %v", after)
	}

	broker.release(t)
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{30}) {
		t.Fatalf("with the broker stopped and broker_owned: false, local segments %v, want only the active one", got)
	}
	if g := gauge(t, r.c.m.dirBrokerOwned.WithLabelValues(r.logDir)); g != 0 {
		t.Errorf("tierd_copier_log_dir_broker_owned %v, want 0", g)
	}
}

// hookBucket runs hook once, when the first object is uploaded.
type hookBucket struct {
	rsm.Bucket
	once sync.Once
	hook func()
}

func (b *hookBucket) Upload(ctx context.Context, key string, rd io.Reader, size int64) error {
	b.once.Do(b.hook)
	return b.Bucket.Upload(ctx, key, rd, size)
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestBrokerLockTakenMidPass: a broker that starts on the log dir after
// the pass looked (here: during the first upload) is seen right before
// local retention would rename a file, or remove a .deleted file (the
// broker's own, from its retention), and nothing is touched.
func TestBrokerLockTakenMidPass(t *testing.T) {
	for _, tc := range []struct {
		name   string
		local  int64   // local.retention.ms
		remain []int64 // local segments once the broker is gone
	}{
		{"local retention due", 0, []int64{30}},
		{"only .deleted files", -1, []int64{0, 10, 20, 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				broker *lockProc
				herr   error
			)
			hb := &hookBucket{Bucket: memory.New()}
			r := brokerRig(t, yes(false), hb)
			r.c.cfg.Retention.LocalRetentionMs = ptr(tc.local)
			deleted := filepath.Join(r.dir(), "00000000000000000000.timeindex.deleted")
			writeFile(t, deleted, "")
			hb.hook = func() { broker, herr = spawnHolder(goHolderCmd(filepath.Join(r.logDir, BrokerLockFile))) }
			t.Cleanup(func() {
				if broker != nil {
					broker.release(t)
				}
			})
			before := listing(t, r.logDir)
			if n := r.sync(); n != 3 {
				t.Fatalf("copied %d", n)
			}
			if broker == nil {
				t.Fatalf("no upload started the broker: %v", herr)
			}
			after := listing(t, r.logDir)
			var ours []string // the holder created .lock: a broker does too
			for _, f := range after {
				if !strings.HasPrefix(f, "/"+BrokerLockFile+" ") {
					ours = append(ours, f)
				}
			}
			if !reflect.DeepEqual(ours, before) {
				t.Fatalf("files touched under a broker that started mid-pass:\nbefore %v\nafter  %v", before, after)
			}
			if d := r.status(r.tp).Detail; !strings.Contains(d, "a running broker holds .lock") {
				t.Errorf("status detail %q", d)
			}
			broker.release(t)
			r.sync()
			if got := r.localBases(); !reflect.DeepEqual(got, tc.remain) {
				t.Fatalf("after the broker stopped: local segments %v, want %v", got, tc.remain)
			}
			if _, err := os.Stat(deleted); !os.IsNotExist(err) {
				t.Errorf("after the broker stopped, the .deleted file is still there (%v)", err)
			}
		})
	}
}

// TestKafkaLogDirUnset: with broker_owned unset, a log dir holding
// meta.properties is a Kafka log dir: tierd copies, and deletes nothing
// there even though no broker runs; a dir without Kafka's files (tierd's
// embedded log) gets local retention; broker_owned: true keeps both.
func TestKafkaLogDirUnset(t *testing.T) {
	r := brokerRig(t, nil, nil)
	before := listing(t, r.logDir)
	if n := r.sync(); n != 3 {
		t.Fatalf("copied %d", n)
	}
	if after := listing(t, r.logDir); !reflect.DeepEqual(after, before) {
		t.Fatalf("unset broker_owned deleted in a Kafka log dir:\nbefore %v\nafter  %v", before, after)
	}
	if st := r.c.LogDirs()[0]; !st.KafkaDir || st.Locked || !st.BrokerOwned || st.Owner != "a Kafka log dir, broker_owned unset" {
		t.Fatalf("state %+v", st)
	}

	os.Remove(filepath.Join(r.logDir, MetaPropertiesFile))
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{30}) {
		t.Fatalf("not a Kafka log dir, unset: local segments %v, want only the active one", got)
	}

	owned := brokerRig(t, yes(true), nil)
	os.Remove(filepath.Join(owned.logDir, MetaPropertiesFile))
	owned.sync()
	if got := owned.localBases(); !reflect.DeepEqual(got, []int64{0, 10, 20, 30}) {
		t.Fatalf("broker_owned: true: local segments %v", got)
	}
}
