package copier

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// hookStore runs hook once, when local retention saves the new local log
// start offset: after the last look at the broker's lock and before the
// first rename.
type hookStore struct {
	MetadataStore
	hook func()
	done bool
}

func (s *hookStore) AdvanceOffsets(tp remotelog.TopicPartition, logStart, localLogStart int64) (remotelog.PartitionOffsets, error) {
	if localLogStart >= 0 && !s.done {
		s.done = true
		s.hook()
	}
	return s.MetadataStore.AdvanceOffsets(tp, logStart, localLogStart)
}

// TestBrokerStartsBetweenCheckAndRename: a Kafka broker (a JVM taking
// the lock FileChannel.tryLock takes on <log.dir>/.lock) starts on the
// log dir at the worst moment: after local retention last looked at the
// lock and before it renames the first segment. Either the broker gets
// its lock and tierd then renames nothing, or tierd's renames exclude
// it (its tryLock fails, as when two brokers share a log dir) and it
// gets the lock once they are done; a broker never holds the lock while
// tierd renames.
func TestBrokerStartsBetweenCheckAndRename(t *testing.T) {
	r := brokerRig(t, yes(false), nil)
	lock := filepath.Join(r.logDir, BrokerLockFile)
	var (
		broker *lockProc
		herr   error
	)
	r.c.store = &hookStore{MetadataStore: r.store, hook: func() {
		broker, herr = spawnHolder(javaCmd(t, lock))
	}}
	r.c.audit.store = r.c.store
	t.Cleanup(func() {
		if broker != nil {
			broker.release(t)
		}
	})
	before := listing(t, r.logDir)
	r.sync()
	after := listing(t, r.logDir)
	if broker != nil {
		var files []string // the broker creates .lock
		for _, f := range after {
			if !strings.HasPrefix(f, "/"+BrokerLockFile+" ") {
				files = append(files, f)
			}
		}
		if !reflect.DeepEqual(files, before) {
			t.Fatalf("tierd renamed files while a broker held the log dir's lock:\nbefore %v\nafter  %v", before, after)
		}
		return
	}
	if herr == nil || !strings.Contains(herr.Error(), "busy") {
		t.Fatalf("the broker neither got its lock nor was refused it: %v", herr)
	}
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{30}) {
		t.Fatalf("local segments %v after local retention excluded the broker, want only the active one", got)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Errorf("tierd left the %s it created (%v): with broker_owned unset it would make the dir a Kafka log dir", lock, err)
	}
	b := startHolder(t, javaCmd(t, lock)) // the broker starts once tierd is done
	b.release(t)
}

// TestExcludeBroker: the shared lock tierd holds while it renames keeps
// a broker's exclusive lock out (the Go holder takes the fcntl lock
// FileChannel.tryLock takes) and is refused while a broker holds it,
// naming its pid; a .lock it had to create is gone once it lets go, one
// that was there stays; this process's own look at the lock meanwhile
// does not drop it; a dangling .lock symlink is an error, not a loop.
func TestExcludeBroker(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, BrokerLockFile)
	for _, existed := range []bool{false, true} {
		if existed {
			writeFile(t, p, "")
		}
		e, _, err := excludeBroker(p)
		if err != nil {
			t.Fatal(err)
		}
		lockHolder(p) // opens and closes the file: the lock must stay
		if h, err := spawnHolder(goHolderCmd(p)); err == nil {
			h.release(t)
			t.Fatalf("existed %v: a broker took its lock while tierd held .lock", existed)
		}
		if err := e.release(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); existed == os.IsNotExist(err) {
			t.Fatalf("existed %v: after release, stat %v", existed, err)
		}
	}
	h := goHolder(t, p)
	if _, pid, err := excludeBroker(p); !errors.Is(err, errBrokerHolds) || pid != h.pid {
		t.Fatalf("with a broker holding .lock: pid %d err %v, want errBrokerHolds from %d", pid, err, h.pid)
	}
	h.release(t)
	os.Remove(p)
	if err := os.Symlink(filepath.Join(dir, "gone", "x"), p); err != nil {
		t.Fatal(err)
	}
	if e, _, err := excludeBroker(p); err == nil || errors.Is(err, errBrokerHolds) {
		if e != nil {
			e.release()
		}
		t.Fatalf("dangling symlink: %v, want an I/O error", err)
	}
}

// TestTierdLockLeftByAKill: a .lock that tierd created while it renamed,
// and could not remove because it was killed, does not make the log dir
// a Kafka log dir (else local retention would stop for good after one
// kill, with broker_owned unset); the next rename removes it. An empty
// .lock (Kafka's) still does, and one a broker holds is still the
// broker's, whatever it holds.
func TestTierdLockLeftByAKill(t *testing.T) {
	r := brokerRig(t, nil, nil)
	os.Remove(filepath.Join(r.logDir, MetaPropertiesFile))
	p := filepath.Join(r.logDir, BrokerLockFile)
	e, _, err := excludeBroker(p)
	if err != nil {
		t.Fatal(err)
	}
	e.f.Close() // killed before release: the file stays
	if st := probeLogDir(r.logDir, nil, nil); st.KafkaDir || st.BrokerOwned {
		t.Fatalf("a .lock left by tierd: %+v, want neither a Kafka log dir nor broker-owned", st)
	}
	h := goHolder(t, p) // a broker starting on the left file keeps its content
	if st := probeLogDir(r.logDir, nil, nil); !st.Locked || !st.BrokerOwned {
		t.Fatalf("a broker holding tierd's left .lock: %+v, want broker-owned", st)
	}
	h.release(t)
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{30}) {
		t.Fatalf("after a kill left tierd's .lock: local segments %v, want only the active one", got)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("tierd's left .lock is still there after its renames: %v", err)
	}
	writeFile(t, p, "")
	if st := probeLogDir(r.logDir, nil, nil); !st.KafkaDir || !st.BrokerOwned {
		t.Fatalf("an empty .lock (Kafka's): %+v, want a broker-owned Kafka log dir", st)
	}
	writeFile(t, p, "tierd")
	if st := probeLogDir(r.logDir, nil, nil); !st.KafkaDir {
		t.Fatalf("a .lock with part of tierd's mark: %+v, want a Kafka log dir", st)
	}
}
