package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
)

// Real Kafka clients reading through tierd's listener, each with its own
// defaults except the bootstrap address and assign-style consumption (no
// consumer group): kcat (librdkafka), franz-go, sarama, and the Debian
// Python clients kafka-python 2.0.2 and confluent-kafka. CI installs kcat
// and the Python clients (.ci/run); elsewhere their tests skip and say so.

type tpKey = kafkalog.TopicPartition

// crec is one record as a client handed it to the application. Key and
// value are nil when null.
type crec struct {
	offset, ts int64
	key, value []byte
	headers    []batch.RecordHeader
}

// diff compares a client's record with the record as stored.
func (c crec) diff(w batch.Record) error {
	if c.offset != w.Offset || !sameBytes(c.key, w.Key) || !sameBytes(c.value, w.Value) || c.ts != w.Timestamp {
		return fmt.Errorf("got offset %d key %s value %s ts %d, want offset %d key %s value %s ts %d",
			c.offset, short(c.key), short(c.value), c.ts, w.Offset, short(w.Key), short(w.Value), w.Timestamp)
	}
	if len(c.headers) != len(w.Headers) {
		return fmt.Errorf("offset %d: %d headers, want %d", c.offset, len(c.headers), len(w.Headers))
	}
	for i, h := range w.Headers {
		if c.headers[i].Key != h.Key || !sameBytes(c.headers[i].Value, h.Value) {
			return fmt.Errorf("offset %d header %d: %q=%s, want %q=%s", c.offset, i, c.headers[i].Key, short(c.headers[i].Value), h.Key, short(h.Value))
		}
	}
	return nil
}

// sameRecords compares what a client read with the records as stored,
// record by record.
func sameRecords(got []crec, want []batch.Record) error {
	for i := range min(len(got), len(want)) {
		if err := got[i].diff(want[i]); err != nil {
			return fmt.Errorf("record %d of %d: %w", i, len(want), err)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d records, want %d", len(got), len(want))
	}
	return nil
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// short prints a key or value for an error message.
func short(b []byte) string {
	switch {
	case b == nil:
		return "null"
	case len(b) > 40:
		return fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func needKcat(t *testing.T) string { t.Helper(); return testtools.Kcat(t) }

func needPython(t *testing.T, module string) { t.Helper(); testtools.NeedPython(t, module) }

// kcatFormat prints a record's offset, timestamp, key and value lengths
// (-1 for null) and headers on one line, then the key and value bytes.
const kcatFormat = "%o %T %K %S %h\n%k%s\n"

// runKcat runs "kcat -C -b addr -q -f kcatFormat args..." and hands each
// record to each as kcat prints it (nothing is kept, so a run may read
// hundreds of MiB). An error from each kills kcat and is returned. With
// notes set, kcat runs without -q and its stderr
// (informational lines such as "Reached end of topic") goes there too.
func runKcat(ctx context.Context, kcat, addr string, args []string, each func(crec) error, notes io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	all := append([]string{"-C", "-b", addr, "-f", kcatFormat}, args...)
	if notes == nil {
		all = append(all, "-q")
	}
	var stderr lockedBuffer
	cmd := exec.CommandContext(ctx, kcat, all...)
	cmd.Stderr = &stderr
	if notes != nil {
		cmd.Stderr = io.MultiWriter(&stderr, notes)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	perr := parseKcat(bufio.NewReaderSize(out, 1<<20), each)
	if perr != nil {
		cancel()
	}
	werr := cmd.Wait()
	if perr == nil && werr != nil && ctx.Err() != nil {
		perr = fmt.Errorf("kcat did not finish in time: %w", ctx.Err())
	}
	if err := errors.Join(perr, werr); err != nil {
		return fmt.Errorf("kcat %s: %w\nstderr: %s", strings.Join(all, " "), err, stderr.String())
	}
	return nil
}

func parseKcat(r *bufio.Reader, each func(crec) error) error {
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			return nil
		}
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 5)
		if err != nil || len(f) != 5 {
			return fmt.Errorf("kcat printed %q: %v", line, err)
		}
		var c crec
		var klen, vlen int
		var errs [4]error
		c.offset, errs[0] = strconv.ParseInt(f[0], 10, 64)
		c.ts, errs[1] = strconv.ParseInt(f[1], 10, 64)
		klen, errs[2] = strconv.Atoi(f[2])
		vlen, errs[3] = strconv.Atoi(f[3])
		if err := errors.Join(errs[:]...); err != nil {
			return fmt.Errorf("kcat printed %q: %w", line, err)
		}
		if f[4] != "" {
			for _, kv := range strings.Split(f[4], ",") {
				k, v, _ := strings.Cut(kv, "=")
				c.headers = append(c.headers, batch.RecordHeader{Key: k, Value: []byte(v)})
			}
		}
		body := make([]byte, max(klen, 0)+max(vlen, 0)+1)
		if _, err := io.ReadFull(r, body); err != nil {
			return fmt.Errorf("kcat record at offset %d: %w", c.offset, err)
		}
		if klen >= 0 {
			c.key = body[:klen]
		}
		if vlen >= 0 {
			c.value = body[max(klen, 0) : max(klen, 0)+vlen]
		}
		if err := each(c); err != nil {
			return err
		}
	}
}

// kcatAll reads a partition with kcat from the beginning to its end (-e).
func kcatAll(kcat, addr string, tp tpKey, extra ...string) ([]crec, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var got []crec
	args := append([]string{"-t", tp.Topic, "-p", strconv.Itoa(int(tp.Partition)), "-o", "beginning", "-e"}, extra...)
	err := runKcat(ctx, kcat, addr, args, func(c crec) error { got = append(got, c); return nil }, nil)
	return got, err
}

// kgoRecord is a franz-go record as a crec (franz-go gives a magic-0
// message, which has no timestamp, the zero time).
func kgoRecord(r *kgo.Record) crec {
	c := crec{offset: r.Offset, ts: r.Timestamp.UnixMilli(), key: r.Key, value: r.Value}
	if r.Timestamp.IsZero() {
		c.ts = batch.NoTimestamp
	}
	for _, h := range r.Headers {
		c.headers = append(c.headers, batch.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return c
}

// kgoRead reads with a franz-go assign-style consumer (kgo.ConsumePartitions,
// no group) from the start of each partition in last until the record at
// offset last[tp] has arrived, and returns the records by partition. A
// fetch error ends it.
func kgoRead(addr string, last map[tpKey]int64, opts ...kgo.Opt) (map[tpKey][]crec, error) {
	parts := map[string]map[int32]kgo.Offset{}
	for tp := range last {
		if parts[tp.Topic] == nil {
			parts[tp.Topic] = map[int32]kgo.Offset{}
		}
		parts[tp.Topic][tp.Partition] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumePartitions(parts)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got := map[tpKey][]crec{}
	pending := len(last)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for pending > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var short []string
			for tp, l := range last {
				if g := got[tp]; len(g) == 0 || g[len(g)-1].offset < l {
					short = append(short, fmt.Sprintf("%s: %d records, the one at %d never came", tp, len(g), l))
				}
			}
			return got, fmt.Errorf("franz-go gave up: %s", strings.Join(short, "; "))
		}
		for _, fe := range fs.Errors() {
			return got, fmt.Errorf("franz-go: fetch error %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := tpKey{Topic: r.Topic, Partition: r.Partition}
			got[tp] = append(got[tp], kgoRecord(r))
			if r.Offset == last[tp] {
				pending--
			}
		})
	}
	return got, nil
}

// saramaRead reads one partition with sarama's partition consumer (cfg,
// or sarama's defaults when nil; no group) from the oldest offset until
// the record at last.
func saramaRead(addr string, tp tpKey, last int64, cfg *sarama.Config) ([]crec, error) {
	if cfg == nil {
		cfg = sarama.NewConfig()
	}
	cfg.Consumer.Return.Errors = true
	c, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	pc, err := c.ConsumePartition(tp.Topic, tp.Partition, sarama.OffsetOldest)
	if err != nil {
		return nil, fmt.Errorf("sarama: %s: %w", tp, err)
	}
	defer pc.Close()
	guard := time.NewTimer(120 * time.Second)
	defer guard.Stop()
	var got []crec
	for len(got) == 0 || got[len(got)-1].offset < last {
		select {
		case m := <-pc.Messages():
			c := crec{offset: m.Offset, ts: m.Timestamp.UnixMilli(), key: m.Key, value: m.Value}
			for _, h := range m.Headers {
				c.headers = append(c.headers, batch.RecordHeader{Key: string(h.Key), Value: h.Value})
			}
			got = append(got, c)
		case err := <-pc.Errors():
			return got, fmt.Errorf("sarama: %s: %w", tp, err)
		case <-guard.C:
			return got, fmt.Errorf("sarama: %s: %d records, the one at %d never came", tp, len(got), last)
		}
	}
	return got, nil
}

// pyScan reads partitions assign-style from the beginning until each
// reached its last offset and prints one JSON object per record (key,
// value and header values in hex, null as null).
const pyScan = `
import json, sys, time
client, addr, iso = sys.argv[1:4]
last = {}
for a in sys.argv[4:]:
    topic, part, off = a.rsplit(":", 2)
    last[(topic, int(part))] = int(off)
pos = {k: -1 for k in last}
hx = lambda b: None if b is None else b.hex()
def out(topic, part, off, ts, key, value, headers):
    ts = -1 if ts is None else ts  # magic 0: no timestamp
    print(json.dumps({"t": topic, "p": part, "o": off, "ts": ts, "k": hx(key), "v": hx(value),
                      "h": [[k, hx(v)] for k, v in (headers or [])]}))
    pos[(topic, part)] = off
deadline = time.time() + 100
def waiting():
    if time.time() > deadline:
        raise SystemExit("gave up at %r, want %r" % (pos, last))
    return any(pos[k] < last[k] for k in last)
if client == "kafka-python":
    from kafka import KafkaConsumer, TopicPartition
    assert iso == "read_uncommitted"  # kafka-python 2.0.2 has no isolation_level
    c = KafkaConsumer(bootstrap_servers=addr, group_id=None, enable_auto_commit=False)
    c.assign([TopicPartition(t, p) for (t, p) in last])
    c.seek_to_beginning()
    while waiting():
        for tp, msgs in c.poll(timeout_ms=500).items():
            for m in msgs:
                out(m.topic, m.partition, m.offset, m.timestamp, m.key, m.value, m.headers)
else:
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE
    # librdkafka needs a group.id even for assign(); nothing is committed.
    c = Consumer({"bootstrap.servers": addr, "group.id": "tierd-e2e", "enable.auto.commit": False, "isolation.level": iso})
    c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for (t, p) in last])
    while waiting():
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise SystemExit("consumer error: %s" % m.error())
        tstype, ts = m.timestamp()
        if tstype == TIMESTAMP_NOT_AVAILABLE:  # magic 0
            ts = None
        out(m.topic(), m.partition(), m.offset(), ts, m.key(), m.value(), m.headers())
c.close()
`

// pythonRead runs pyScan with client ("kafka-python" or "confluent-kafka")
// at isolation level iso and returns the records by partition.
func pythonRead(client, addr, iso string, last map[tpKey]int64) (map[tpKey][]crec, error) {
	dir, err := os.MkdirTemp("", "tierd-e2e-py")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "scan.py")
	if err := os.WriteFile(script, []byte(pyScan), 0o600); err != nil {
		return nil, err
	}
	args := []string{script, client, addr, iso}
	for tp, l := range last {
		args = append(args, fmt.Sprintf("%s:%d:%d", tp.Topic, tp.Partition, l))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testtools.Python, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", client, err, stderr.String())
	}
	got := map[tpKey][]crec{}
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
			return nil, fmt.Errorf("%s printed: %w", client, err)
		}
		var bad error
		unhex := func(s *string) []byte {
			if s == nil {
				return nil
			}
			b, err := hex.DecodeString(*s)
			if err != nil {
				bad = err
			}
			return b
		}
		c := crec{offset: j.O, ts: j.TS, key: unhex(j.K), value: unhex(j.V)}
		for _, h := range j.H {
			c.headers = append(c.headers, batch.RecordHeader{Key: *h[0], Value: unhex(h[1])})
		}
		if bad != nil {
			return nil, fmt.Errorf("%s printed: %w", client, bad)
		}
		tp := tpKey{Topic: j.T, Partition: j.P}
		got[tp] = append(got[tp], c)
	}
	return got, nil
}
