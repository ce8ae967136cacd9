package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/seglog"
)

// txnPartition writes, with tierd's embedded segment log, a partition
// <name> in the rig's broker log dir whose rolled segments hold
// transactions of two producers, some committed and some aborted (so
// each rolled segment with an abort marker has a .txnindex, as a broker's
// does), between plain batches. It returns the directory and how many
// rolled segments have a .txnindex.
func (r *rsmCrashRig) txnPartition(t *testing.T, name string) (string, int) {
	t.Helper()
	dir := filepath.Join(r.root, "kafka-data", name)
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), 20000)
	rec := func(i int) seglog.Record {
		return seglog.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: value, Timestamp: 1700000000000 + int64(i)}
	}
	for i := 0; i < 200; i++ {
		switch i % 5 {
		case 0, 1:
			if _, err := l.Append(rec(i)); err != nil {
				t.Fatal(err)
			}
		default:
			pid := int64(1000 + i%2)
			if _, err := l.AppendTransactional(pid, 0, rec(i)); err != nil {
				t.Fatal(err)
			}
			if i%5 == 4 {
				for _, p := range []int64{1000, 1001} {
					if _, err := l.EndTransaction(p, 0, (i/5)%2 == 0); err != nil && !strings.Contains(err.Error(), "no open transaction") {
						t.Fatal(err)
					}
				}
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "leader-epoch-checkpoint")); err != nil {
		os.WriteFile(filepath.Join(dir, "leader-epoch-checkpoint"), []byte("0\n1\n0 0\n"), 0o644)
	}
	ents, _ := os.ReadDir(dir)
	var logs, txns []int64
	for _, e := range ents {
		if f, ok := kafkalog.ParseFileName(e.Name()); ok {
			switch f.Suffix {
			case kafkalog.LogSuffix:
				logs = append(logs, f.BaseOffset)
			case kafkalog.TxnIndexSuffix:
				txns = append(txns, f.BaseOffset)
			}
		}
	}
	if len(logs) < 3 {
		t.Fatalf("the transactional partition rolled %d segments; want 3 or more", len(logs))
	}
	last := logs[0]
	for _, o := range logs {
		last = max(last, o)
	}
	rolledTxn := 0
	for _, o := range txns {
		if o != last {
			rolledTxn++
		}
	}
	return dir, rolledTxn
}

// TestPluginTransactionsAndKill: the plugin's lifecycle over segments with
// transactions (each .txnindex read back equal through fetchIndex
// TRANSACTION, the others answered not found), and tierd killed during a
// copy the plugin is waiting for: the plugin gets an error, and after the
// restart the broker's delete of that attempt leaves nothing in the bucket.
func TestPluginTransactionsAndKill(t *testing.T) {
	t.Parallel()
	buildDriver(t)
	r := newRSMCrashRig(t)
	txnDir, withTxn := r.txnPartition(t, "orders-5")
	if withTxn == 0 {
		t.Fatal("no rolled segment of the transactional partition has a .txnindex")
	}
	r.start("")
	out, code := r.driver(t, "kafka-rsm-api-stubs.jar", "lifecycle", txnDir)
	if code != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("lifecycle of segments with transactions: exit %d\n%s", code, out)
	}
	equal := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "ok index TRANSACTION") && strings.Contains(line, " equal") {
			equal++
		}
	}
	if n := equal; n != withTxn {
		t.Errorf("TRANSACTION indexes read back equal: %d; want %d (one per rolled segment with a .txnindex)\n%s", n, withTxn, out)
	}

	// tierd killed while the plugin waits for a copy of the big segment.
	id := remotelog.NewSegmentID()
	logKey := fmt.Sprintf("%s/orders-0/%020d-%s.log", r.brokerPrefix, 0, id)
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
	type result struct {
		out  string
		code int
	}
	copied := make(chan result, 1)
	go func() {
		out, code := r.driver(t, "kafka-rsm-api-stubs.jar", "copy", r.seg, "--base", "0", "--segment-id", id.String(), "--expect", "error")
		copied <- result{out, code}
	}()
	select {
	case <-stalled:
	case <-time.After(2 * time.Minute):
		t.Fatal("the copy's .log upload never reached its second part")
	}
	r.proc.Process.Signal(syscall.SIGKILL)
	<-r.procDone
	r.proxy.SetRule(nil)
	if res := <-copied; res.code != 0 {
		t.Errorf("the plugin's copy while tierd is killed: exit %d; want a RemoteStorageException\n%s", res.code, res.out)
	}
	r.start("")
	if out, code := r.driver(t, "kafka-rsm-api-stubs.jar", "delete", r.seg, "--base", "0", "--segment-id", id.String(), "--expect", "ok"); code != 0 {
		t.Errorf("the broker's delete of the killed attempt: exit %d\n%s", code, out)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		objects, uploads := r.keysOf(id)
		if len(objects) == 0 && len(uploads) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left of the killed attempt after the broker's delete: objects %v, uploads %v\n%s", objects, uploads, r.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, code := r.driver(t, "kafka-rsm-api-stubs.jar", "missing", r.seg, "--base", "0", "--segment-id", id.String()); code != 0 {
		t.Errorf("reads of the deleted attempt: exit %d\n%s", code, out)
	}
	r.proc.Process.Signal(syscall.SIGTERM)
	<-r.procDone
}
