package listener

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
)

// Real clients outside Go: kcat (librdkafka) and the Debian Python
// clients (kafka-python, confluent-kafka), each with its own defaults but
// the bootstrap address and assign-style consumption. CI installs them
// (.ci/run: kcat, python3-kafka, python3-confluent-kafka); elsewhere the
// tests skip when they are missing.

func needKcat(t *testing.T) string { t.Helper(); return testtools.Kcat(t) }

func needPython(t *testing.T, module string) { t.Helper(); testtools.NeedPython(t, module) }

// clientRecord is a record as an outside client printed it.
type clientRecord struct {
	offset, ts int64
	key, value []byte // nil for null
	headers    []batch.RecordHeader
}

func (r clientRecord) check(w batch.Record, withTimestamp bool) error {
	if r.offset != w.Offset || !sameBytes(r.key, w.Key) || !sameBytes(r.value, w.Value) || (withTimestamp && r.ts != w.Timestamp) {
		return fmt.Errorf("got offset %d key %q value %q ts %d, want offset %d key %q value %q ts %d",
			r.offset, r.key, r.value, r.ts, w.Offset, w.Key, w.Value, w.Timestamp)
	}
	if len(r.headers) != len(w.Headers) {
		return fmt.Errorf("offset %d: %d headers, want %d", r.offset, len(r.headers), len(w.Headers))
	}
	for i, h := range w.Headers {
		if r.headers[i].Key != h.Key || !bytes.Equal(r.headers[i].Value, h.Value) {
			return fmt.Errorf("offset %d header %d: %q=%q, want %q=%q", r.offset, i, r.headers[i].Key, r.headers[i].Value, h.Key, h.Value)
		}
	}
	return nil
}

// clientsLog serves every fixture partition, the transactions log and a
// partition with headers and null keys.
func clientsLog(t *testing.T) (*fakeLog, []fixturePart) {
	l := newFakeLog()
	parts := loadFixtures(t, l)
	tl := txnLog(t)
	l.topics["txn"] = tl.topics["txn"]
	h := batch.Record{Timestamp: 5000, Value: []byte("with headers"),
		Headers: []batch.RecordHeader{{Key: "h1", Value: []byte("one")}, {Key: "h2", Value: []byte("two")}}}
	l.appendRaw(t, "hdr", 0, v2(t, batch.NewParams(0, 0), h, batch.Record{Timestamp: 5001, Key: []byte("k"), Value: []byte{}}))
	hp := fixturePart{tp: TopicPartition{"hdr", 0}}
	for _, e := range l.topics["hdr"].parts[0].entries {
		hp.want = append(hp.want, e.records...)
	}
	return l, append(parts, hp)
}

// kcatConsume runs kcat -C on one partition from the beginning to the end
// and parses what it prints.
func kcatConsume(kcat, addr string, tp TopicPartition, extra ...string) ([]clientRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"-C", "-b", addr, "-t", tp.Topic, "-p", strconv.Itoa(int(tp.Partition)), "-o", "beginning", "-e", "-q",
		"-f", "%o %T %K %S %h\n%k%s\n"}, extra...)
	cmd := exec.CommandContext(ctx, kcat, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kcat %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var recs []clientRecord
	r := bufio.NewReader(bytes.NewReader(out))
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			return recs, nil
		}
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 5)
		if err != nil || len(f) != 5 {
			return nil, fmt.Errorf("%s: kcat line %q: %v", tp, line, err)
		}
		var c clientRecord
		var klen, vlen int
		c.offset, _ = strconv.ParseInt(f[0], 10, 64)
		c.ts, _ = strconv.ParseInt(f[1], 10, 64)
		klen, _ = strconv.Atoi(f[2])
		vlen, _ = strconv.Atoi(f[3])
		if f[4] != "" {
			for _, kv := range strings.Split(f[4], ",") {
				k, v, _ := strings.Cut(kv, "=")
				c.headers = append(c.headers, batch.RecordHeader{Key: k, Value: []byte(v)})
			}
		}
		body := make([]byte, max(klen, 0)+max(vlen, 0)+1)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("%s: kcat record at %d: %w", tp, c.offset, err)
		}
		if klen >= 0 {
			c.key = body[:klen]
		}
		if vlen >= 0 {
			c.value = body[max(klen, 0) : max(klen, 0)+vlen]
		}
		recs = append(recs, c)
	}
}

// TestKcat: kcat reads every fixture partition (and headers, null keys)
// from the beginning to the end exactly as stored; read_committed skips
// the aborted transaction; producing fails at once with a clear error.
func TestKcat(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	l, parts := clientsLog(t)
	ts := startServer(t, l, nil)
	// One kcat per partition, a few at a time: each waits for the end of
	// its partition (a fetch answered empty after fetch.wait.max.ms).
	var g errgroup.Group
	g.SetLimit(8)
	for _, p := range parts {
		g.Go(func() error {
			got, err := kcatConsume(kcat, ts.addr, p.tp)
			if err != nil {
				return err
			}
			if len(got) != len(p.want) {
				return fmt.Errorf("%s: kcat read %d records, want %d", p.tp, len(got), len(p.want))
			}
			for i := range got {
				if err := got[i].check(p.want[i], true); err != nil {
					return fmt.Errorf("%s: %w", p.tp, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for iso, want := range map[string][]int64{"read_committed": {0, 1, 4, 5, 8}, "read_uncommitted": {0, 1, 2, 3, 4, 5, 8, 9, 10}} {
		var offs []int64
		recs, err := kcatConsume(kcat, ts.addr, TopicPartition{"txn", 0}, "-X", "isolation.level="+iso)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			offs = append(offs, r.offset)
		}
		if fmt.Sprint(offs) != fmt.Sprint(want) {
			t.Fatalf("%s: offsets %v, want %v", iso, offs, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-P", "-b", ts.addr, "-t", "hdr", "-p", "0")
	cmd.Stdin = strings.NewReader("must not be written\n")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("kcat -P hung: %s", out)
	}
	if err == nil || !strings.Contains(string(out), "Topic authorization failed") {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	if n := len(l.topics["hdr"].parts[0].entries); n != 1 {
		t.Fatalf("produce wrote: %d entries", n)
	}
	t.Logf("kcat -P: %v: %s", err, bytes.TrimSpace(out))
	if n := ts.closed(reasonUnsupported) + ts.closed(reasonMalformed); n != 0 {
		t.Fatalf("kcat sent %v requests the listener refused:\n%s", n, ts.logs.String())
	}
}

// pyConsumer reads partitions assign-style from the beginning until it
// has the number of records asked for, and prints one JSON object each.
const pyConsumer = `
import json, sys
client, addr, iso = sys.argv[1], sys.argv[2], sys.argv[3]
want = {}
for a in sys.argv[4:]:
    topic, part, n = a.rsplit(":", 2)
    want[(topic, int(part))] = int(n)
hx = lambda b: None if b is None else b.hex()
got = {k: 0 for k in want}
def emit(topic, part, off, ts, key, value, headers):
    print(json.dumps({"t": topic, "p": part, "o": off, "ts": ts, "k": hx(key), "v": hx(value),
                      "h": [[k, hx(v)] for k, v in (headers or [])]}))
    got[(topic, part)] += 1
if client == "kafka-python":
    from kafka import KafkaConsumer, TopicPartition
    # kafka-python 2.0.2 reads uncommitted only (no isolation_level).
    assert iso == "read_uncommitted"
    c = KafkaConsumer(bootstrap_servers=addr, group_id=None, enable_auto_commit=False)
    c.assign([TopicPartition(t, p) for (t, p) in want])
    c.seek_to_beginning()
    while any(got[k] < want[k] for k in want):
        for tp, msgs in c.poll(timeout_ms=500).items():
            for m in msgs:
                emit(m.topic, m.partition, m.offset, m.timestamp, m.key, m.value, m.headers)
else:
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    c = Consumer({"bootstrap.servers": addr, "group.id": "tierd-test", "enable.auto.commit": False, "isolation.level": iso})
    c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for (t, p) in want])
    while any(got[k] < want[k] for k in want):
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise SystemExit("consumer error: %s" % m.error())
        emit(m.topic(), m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(), m.headers())
c.close()
`

func runPython(t *testing.T, client, addr, iso string, want map[TopicPartition]int) map[TopicPartition][]clientRecord {
	t.Helper()
	script := filepath.Join(t.TempDir(), "consume.py")
	if err := os.WriteFile(script, []byte(pyConsumer), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{script, client, addr, iso}
	for tp, n := range want {
		args = append(args, fmt.Sprintf("%s:%d:%d", tp.Topic, tp.Partition, n))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testtools.Python, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", client, err, stderr.String())
	}
	got := map[TopicPartition][]clientRecord{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var j struct {
			T     string
			P     int32
			O, TS int64
			K, V  *string
			H     [][2]*string
		}
		if err := dec.Decode(&j); err != nil {
			t.Fatalf("%s output: %v", client, err)
		}
		unhex := func(s *string) []byte {
			if s == nil {
				return nil
			}
			b, err := hex.DecodeString(*s)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		c := clientRecord{offset: j.O, ts: j.TS, key: unhex(j.K), value: unhex(j.V)}
		for _, h := range j.H {
			c.headers = append(c.headers, batch.RecordHeader{Key: *h[0], Value: unhex(h[1])})
		}
		tp := TopicPartition{j.T, j.P}
		got[tp] = append(got[tp], c)
	}
	return got
}

// TestPythonClients: kafka-python and confluent-kafka read magic 1 and
// mixed logs, gzip, headers and null keys, the partitions around a
// numbering hole, and a log with an aborted transaction: every data record
// read_uncommitted, the committed ones read_committed (confluent-kafka
// only: kafka-python 2.0.2 has no read_committed and returns control
// records).
func TestPythonClients(t *testing.T) {
	t.Parallel()
	l, parts := clientsLog(t)
	ho, hoWant := offsetsTopicLog(t)
	l.topics["__consumer_offsets"] = ho.topics["__consumer_offsets"]
	for p, w := range hoWant {
		parts = append(parts, fixturePart{tp: TopicPartition{"__consumer_offsets", p}, want: w})
	}
	ts := startServer(t, l, nil)
	picked := map[TopicPartition][]batch.Record{}
	for _, p := range parts {
		for _, s := range []string{"topic1", "test-88", "topic-logx-001", "TestTopicPatient", "hdr", "__consumer_offsets"} {
			if strings.Contains(p.tp.Topic, s) && len(p.want) > 0 {
				picked[p.tp] = p.want
			}
		}
	}
	want := map[TopicPartition]int{}
	for tp, w := range picked {
		want[tp] = len(w)
	}
	for _, client := range []string{"kafka-python", "confluent-kafka"} {
		t.Run(client, func(t *testing.T) {
			needPython(t, map[string]string{"kafka-python": "kafka", "confluent-kafka": "confluent_kafka"}[client])
			got := runPython(t, client, ts.addr, "read_uncommitted", want)
			for tp, w := range picked {
				g := got[tp]
				if len(g) != len(w) {
					t.Fatalf("%s: %d records, want %d", tp, len(g), len(w))
				}
				for i := range g {
					if err := g[i].check(w[i], true); err != nil {
						t.Fatalf("%s: %v", tp, err)
					}
				}
			}
			txn := TopicPartition{"txn", 0}
			isos := map[string]string{"read_uncommitted": "[0 1 2 3 4 5 8 9 10]", "read_committed": "[0 1 4 5 8]"}
			if client == "kafka-python" {
				// kafka-python 2.0.2 has no read_committed, and hands
				// the transaction markers (control batches, served as
				// stored, as Kafka does) to the application as records.
				isos = map[string]string{"read_uncommitted": "[0 1 2 3 4 5 6 7 8 9 10]"}
			}
			for iso, want := range isos {
				var offs []int64
				n := strings.Count(want, " ") + 1
				for _, r := range runPython(t, client, ts.addr, iso, map[TopicPartition]int{txn: n})[txn] {
					offs = append(offs, r.offset)
				}
				if fmt.Sprint(offs) != want {
					t.Fatalf("%s offsets %v, want %s", iso, offs, want)
				}
			}
			if n := ts.closed(reasonUnsupported) + ts.closed(reasonMalformed); n != 0 {
				t.Fatalf("%s sent %v requests the listener refused:\n%s", client, n, ts.logs.String())
			}
		})
	}
}

// TestKcatRetriesUnavailable: librdkafka retries a partition whose storage
// does not answer (KAFKA_STORAGE_ERROR) and reads it once it does.
func TestKcatRetriesUnavailable(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	l := smallLog(t)
	l.set("t", 0, func(p *fakePart) { p.err = fmt.Errorf("bucket timeout: %w", ErrUnavailable) })
	ts := startServer(t, l, nil)
	go func() {
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end) &&
			counterErr(ts, "Fetch", "KAFKA_STORAGE_ERROR")+counterErr(ts, "ListOffsets", "KAFKA_STORAGE_ERROR") < 2; {
			time.Sleep(5 * time.Millisecond)
		}
		l.set("t", 0, func(p *fakePart) { p.err = nil })
	}()
	recs, err := kcatConsume(kcat, ts.addr, TopicPartition{"t", 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 || recs[5].offset != 5 {
		t.Fatalf("kcat read %+v", recs)
	}
}
