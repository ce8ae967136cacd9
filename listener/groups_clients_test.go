package listener

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/listener/groups/groupstest"
)

// committed returns group's committed offset of each orders partition
// (-1 for none), through kadm.
func committed(t *testing.T, addr, group string, parts int32) []int64 {
	t.Helper()
	offs, err := kadm.NewClient(newPlainClient(t, addr)).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, parts)
	for p := int32(0); p < parts; p++ {
		out[p] = -1
		if o, ok := offs.Lookup("orders", p); ok && o.Err == nil {
			out[p] = o.At
		}
	}
	return out
}

func allAt(offs []int64, want int64) bool {
	for _, o := range offs {
		if o != want {
			return false
		}
	}
	return true
}

// TestKcatGroup: kcat -G (librdkafka's balanced consumer) finds tierd as
// its group's coordinator, reads every record once, and commits on
// close; run again, it reads only what came after its commit.
func TestKcatGroup(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	ts, _ := groupServer(t, 2, 15, groupstest.NewMemStore())
	run := func(want int) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, "-b", ts.addr, "-G", "kcat-group", "orders", "-e", "-q", "-f", "%p:%o:%s\n",
			"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-X", "topic.metadata.refresh.interval.ms=500")
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat -G: %v\n%s", err, stderr.String())
		}
		lines := strings.Fields(out.String())
		if len(lines) != want {
			t.Fatalf("kcat -G read %d records, want %d:\n%s\n%s", len(lines), want, out.String(), stderr.String())
		}
		return lines
	}
	seen := map[string]bool{}
	for _, l := range run(30) {
		if seen[l] {
			t.Errorf("record %s read twice", l)
		}
		seen[l] = true
	}
	if offs := committed(t, ts.addr, "kcat-group", 2); !allAt(offs, 15) {
		t.Fatalf("kcat committed %v, want 15 for both partitions", offs)
	}
	ts.log.appendRaw(t, "orders", 0, v2(t, batch.NewParams(15, 0), rec("late", "after-commit", 9000)))
	if got := run(1); got[0] != "0:15:after-commit" {
		t.Fatalf("second kcat -G read %v, want only 0:15:after-commit", got)
	}
}

const pyGroupConsumer = `
import sys
client, addr, group, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
n = 0
if client == "kafka-python":
    from kafka import KafkaConsumer
    c = KafkaConsumer("orders", bootstrap_servers=addr, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=1000,
                      consumer_timeout_ms=30000)
    for m in c:
        print("%d:%d:%s" % (m.partition, m.offset, m.value.decode()))
        n += 1
        if n >= want:
            break
    c.commit()
    c.close()
else:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": addr, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    c.subscribe(["orders"])
    import time
    deadline = time.time() + 30
    while n < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise SystemExit("consumer error: %s" % m.error())
        print("%d:%d:%s" % (m.partition(), m.offset(), m.value().decode()))
        n += 1
    c.commit(asynchronous=False)
    c.close()
`

// TestPythonGroupConsumers: kafka-python and confluent-kafka consumers
// that subscribe with a group id read every record once, commit, and a
// second run of the group reads only what came after the commit.
func TestPythonGroupConsumers(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "group.py")
	if err := os.WriteFile(script, []byte(pyGroupConsumer), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, client := range []string{"kafka-python", "confluent-kafka"} {
		t.Run(client, func(t *testing.T) {
			needPython(t, map[string]string{"kafka-python": "kafka", "confluent-kafka": "confluent_kafka"}[client])
			ts, _ := groupServer(t, 2, 10, groupstest.NewMemStore())
			group := "py-" + client
			run := func(want int) []string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, testtools.Python, script, client, ts.addr, group, strconv.Itoa(want))
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s: %v\n%s", client, err, stderr.String())
				}
				lines := strings.Fields(string(out))
				if len(lines) != want {
					t.Fatalf("%s read %d records, want %d:\n%s\n%s", client, len(lines), want, out, stderr.String())
				}
				return lines
			}
			seen := map[string]bool{}
			for _, l := range run(20) {
				if seen[l] {
					t.Errorf("record %s read twice", l)
				}
				seen[l] = true
			}
			if offs := committed(t, ts.addr, group, 2); !allAt(offs, 10) {
				t.Fatalf("%s committed %v, want 10 for both partitions", client, offs)
			}
			ts.log.appendRaw(t, "orders", 1, v2(t, batch.NewParams(10, 0), rec("late", "after-commit", 9000)))
			if got := run(1); got[0] != "1:10:after-commit" {
				t.Fatalf("second run read %v, want only 1:10:after-commit", got)
			}
		})
	}
}
