package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tierd/tierd/copier/topics"
)

func loadYAML(t *testing.T, y string) (Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tierd.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(p)
}

const base = "copier:\n  log_dirs: [/x]\n  broker_id: 1\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n"

// TestConfigMessages: unknown keys get the nearest known key, values of the
// wrong kind are described in durations, milliseconds and bytes (with the
// conversion when the value had another unit), all problems at once.
func TestConfigMessages(t *testing.T) {
	_, err := loadYAML(t, `copier:
  log_dirs: [/x]
  broker_id: 1
  remote.log.manager.task.interval: 1000
  file.delete.delay.ms: 10s
  copy_timeout: 300
  log.retention.bytes: 1GiB
  remote.storage.enable: yes please
  topics:
    orders: {retention.msec: 5, local.retention.bytes: lots}
fetch:
  remote.fetch.max.wait: 100
  listen: [a, b]
kafka:
  remote.fetch.max.wait.ms: 5
metadata: {dir: /m}
bucket: {filesystem: {dir: /b}}
`)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		`line 4: copier: unknown key "remote.log.manager.task.interval"; did you mean "remote.log.manager.task.interval.ms"?`,
		`line 5: copier.file.delete.delay.ms: "10s": want milliseconds, a whole number such as 60000 (10s is 10000)`,
		`line 6: copier.copy_timeout: "300": want a duration like 10s or 5m (a number needs a unit: 300s, 300ms?)`,
		`line 7: copier.log.retention.bytes: "1GiB": want bytes, a whole number such as 1048576 (1GiB is 1073741824)`,
		`line 8: copier.remote.storage.enable: "yes please": want true or false`,
		`line 10: copier.topics.orders: unknown key "retention.msec"; did you mean "retention.ms"?`,
		`line 10: copier.topics.orders.local.retention.bytes: "lots": want bytes`,
		`line 12: fetch: unknown key "remote.fetch.max.wait"; did you mean "remote.fetch.max.wait.ms"?`,
		`line 13: fetch.listen: a list: want a single value`,
		`line 15: kafka: unknown key "remote.fetch.max.wait.ms"; did you mean "remote.fetch.max.wait.ms" (in section fetch)?`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks\n  %s\ngot:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "int64") || strings.Contains(err.Error(), "time.Duration") || strings.Contains(err.Error(), "!!") {
		t.Errorf("error speaks Go types:\n%v", err)
	}
	// A duration of 0 needs no unit.
	cfg, err := loadYAML(t, base+"fetch: {request_timeout: 30s}\n")
	if err != nil {
		t.Fatal(err)
	}
	cfg2, err := loadYAML(t, strings.Replace(base, "broker_id: 1", "broker_id: 1\n  ownership_lease: 0", 1))
	if err != nil || cfg2.Copier.OwnershipLease != 0 || cfg.Fetch.RequestTimeout != 30*time.Second {
		t.Fatalf("ownership_lease: 0: %v", err)
	}
}

// TestOldSpellings: the old keys load, converted to Kafka's names and
// units, each with a warning naming the new key; both spellings of one
// setting are an error; the minio endpoint becomes a URL.
func TestOldSpellings(t *testing.T) {
	cfg, err := loadYAML(t, `copier:
  log_dirs: [/x]
  broker_id: 1
  interval: 5s
  file_delete_delay: 2m
  copy_concurrency: 3
  retention:
    retention.ms: 3600000
    local.retention.bytes: 100
metadata: {dir: /m}
bucket:
  type: minio
  minio: {endpoint: "127.0.0.1:9000", bucket: b, insecure: true}
`)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Copier
	if c.TaskIntervalMs != 5000 || c.FileDeleteDelayMs != 120000 || c.CopierThreadPoolSize != 3 ||
		*c.Retention.RetentionMs != 3600000 || *c.Retention.LocalRetentionBytes != 100 || cfg.Bucket.MinIO.Endpoint != "http://127.0.0.1:9000" {
		t.Fatalf("converted: %+v, endpoint %s", c, cfg.Bucket.MinIO.Endpoint)
	}
	w := strings.Join(cfg.Warnings(), "\n")
	for _, want := range []string{
		"copier.interval is now copier.remote.log.manager.task.interval.ms (Kafka's name): write remote.log.manager.task.interval.ms: 5000",
		"copier.file_delete_delay is now copier.file.delete.delay.ms (Kafka's name): write file.delete.delay.ms: 120000",
		"copier.copy_concurrency is now copier.remote.log.manager.copier.thread.pool.size",
		"copier.retention.retention.ms is now copier.log.retention.ms (Kafka's broker-level name): write log.retention.ms: 3600000",
		"copier.retention.local.retention.bytes is now copier.log.local.retention.bytes",
		"bucket.minio.endpoint host:port with insecure: true is the old form: write endpoint: http://127.0.0.1:9000",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if len(cfg.Warnings()) != 6 {
		t.Errorf("%d warnings, want 6:\n%s", len(cfg.Warnings()), w)
	}
	if got := cfg.Source("copier.remote.log.manager.task.interval.ms"); got != "file (as copier.interval, an old spelling)" {
		t.Errorf("source %q", got)
	}
	for name, y := range map[string]string{
		"both":             strings.Replace(base, "broker_id: 1", "broker_id: 1\n  interval: 5s\n  remote.log.manager.task.interval.ms: 5000", 1),
		"both retention":   strings.Replace(base, "broker_id: 1", "broker_id: 1\n  log.retention.ms: 5\n  retention: {retention.ms: 5}", 1),
		"https + insecure": base + "  type: minio\n  minio: {endpoint: \"https://h:9000\", bucket: b, insecure: true}\n",
	} {
		if _, err := loadYAML(t, strings.Replace(y, "bucket: {filesystem: {dir: /b}}\n  type", "bucket:\n  type", 1)); err == nil ||
			!(strings.Contains(err.Error(), "not both") || strings.Contains(err.Error(), "contradicts")) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestMarshalledConfigLoads: a config written by yaml.Marshal (as "tierd
// demo --keep" writes one) loads back equal, in today's spelling (no
// warnings).
func TestMarshalledConfigLoads(t *testing.T) {
	cfg := Default()
	cfg.Copier.LogDirs, cfg.Copier.BrokerID, cfg.Metadata.Dir, cfg.Bucket.Filesystem.Dir = []string{"/x"}, 1, "/m", "/b"
	lr := int64(60000)
	cfg.Copier.Topics = map[string]topics.TopicConfig{"orders": {Retention: topics.Retention{LocalRetentionMs: &lr}}}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	back, err := loadYAML(t, string(data))
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(back.Warnings()) != 0 {
		t.Errorf("warnings %v", back.Warnings())
	}
	if d, s := Diff(cfg, back); len(d)+len(s) != 0 {
		t.Errorf("loaded back with changes: %v %v", d, s)
	}
}

// TestConfigOutOfRange: a whole number past its setting's type is "out of
// range" with the range in the setting's units, never a Go type or "whole
// numbers"; settings that size pools and buffers have sane maxima.
func TestConfigOutOfRange(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"fetch:\n  fetch.max.bytes: 9223372036854775807\n", "fetch.fetch.max.bytes: 9223372036854775807 is out of range (at most 2147483647 bytes)"},
		{"kafka:\n  socket.request.max.bytes: -2147483649\n", "kafka.socket.request.max.bytes: -2147483649 is out of range (at least -2147483648 bytes)"},
		{"fetch:\n  remote.fetch.max.wait.ms: 99999999999999999999\n", "fetch.remote.fetch.max.wait.ms: 99999999999999999999 is out of range (at most 9223372036854775807 ms)"},
		{"copier:\n  topics:\n    orders:\n      retention.ms: -99999999999999999999\n", "retention.ms: -99999999999999999999 is out of range (at least -9223372036854775808 ms)"},
		{"bucket:\n  minio:\n    part_concurrency: 99999999999999999999\n", "bucket.minio.part_concurrency: 99999999999999999999 is out of range (at most 18446744073709551615)"},
		{"copier:\n  remote.log.manager.copier.thread.pool.size: 9223372036854775807\n", "remote.log.manager.copier.thread.pool.size 9223372036854775807 is out of range (from 1 to 1024"},
		{"copier:\n  remote.log.manager.task.interval.ms: 9223372036854775807\n", "remote.log.manager.task.interval.ms 9223372036854775807 is out of range (at most 9223372036854 ms"},
		{"fetch:\n  remote.fetch.max.inflight.gets: 9223372036854775807\n", "remote.fetch.max.inflight.gets 9223372036854775807 is out of range (from 1 to 1024"},
		{"copier:\n  copy_checks_per_pass: 9223372036854775807\n", "copy_checks_per_pass 9223372036854775807 is out of range"},
	} {
		y := strings.Replace(base, "copier:\n", "copier:\n  ownership_lease: 0s\n", 1) + tc.yaml
		if strings.HasPrefix(tc.yaml, "copier:\n") {
			y = strings.Replace(base, "copier:\n", tc.yaml, 1)
		}
		_, err := loadYAML(t, y)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "int32") || strings.Contains(err.Error(), "whole numbers") || strings.Contains(err.Error(), "unmarshal")) {
			t.Errorf("%q: %v speaks Go or calls it a fraction", tc.yaml, err)
		}
	}
	// Long.MAX_VALUE is accepted where Kafka means forever or no limit.
	for _, set := range []string{"  topics:\n    orders:\n      retention.ms: 9223372036854775807\n      local.retention.ms: 9223372036854775807\n",
		"  log.retention.ms: 9223372036854775807\n  remote.log.delete.delay.ms: 9223372036854775807\n  file.delete.delay.ms: 9223372036854775807\n"} {
		y := strings.Replace(base, "copier:\n", "copier:\n"+set, 1)
		if _, err := loadYAML(t, y); err != nil {
			t.Errorf("%q: %v", y, err)
		}
	}
}

// TestErrorLines: a bad key's error names its line in the file, comments
// and blank lines counted, at every depth: a key set twice (found by the
// strict decode of the converted file, whose lines are not the file's)
// at the top, in a section, in a topic's settings; an unknown one.
func TestErrorLines(t *testing.T) {
	_, err := loadYAML(t, `# tierd.yaml
copier:
  log_dirs: [/x]

  # the broker
  broker_id: 1
  topics:
    orders:
      retention.ms: 5

      retention.ms: 6
metadata: {dir: /m}


bucket:
  filesystem:
    dir: /b
    # again
    dir: /c
log_level: info
log_level: debug
`)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		`line 11: copier.topics.orders: "retention.ms" is set twice (first at line 9)`,
		`line 19: bucket.filesystem: "dir" is set twice (first at line 17)`,
		`line 21: top level: "log_level" is set twice (first at line 20)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	_, err = loadYAML(t, "copier:\n  log_dirs: [/x]\n\n  broker_id: 1\n  topics:\n\n    orders:\n      # a comment\n      retention.msec: 5\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n")
	if err == nil || !strings.Contains(err.Error(), `line 9: copier.topics.orders: unknown key "retention.msec"`) {
		t.Errorf("unknown key: %v", err)
	}
}

// TestFileLines: an error of the strict decode, which reads the converted
// file, names the file's lines, not the converted text's.
func TestFileLines(t *testing.T) {
	file := "# c\ncopier:\n\n  # the broker\n  broker_id: 1\n\n  topics:\n    orders: {retention.ms: 5}\n"
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(file), &root); err != nil {
		t.Fatal(err)
	}
	converted, err := yaml.Marshal(&root)
	if err != nil {
		t.Fatal(err)
	}
	convLine := func(s string) int {
		for i, l := range strings.Split(string(converted), "\n") {
			if strings.Contains(l, s) {
				return i + 1
			}
		}
		t.Fatalf("%q not in %s", s, converted)
		return 0
	}
	b, r := convLine("broker_id"), convLine("retention.ms")
	if b == 5 && r == 8 {
		t.Fatalf("the converted text keeps the file's lines, nothing to test:\n%s", converted)
	}
	got := fileLines(fmt.Errorf("yaml: line %d: x; defined at line %d; line 999: y", r, b), &root, converted).Error()
	if want := "yaml: line 8: x; defined at line 5; a line the file does not have: y"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestNestedKeyHint: a dotted key written nested is told how to write it;
// the objects section's settings load when written whole.
func TestNestedKeyHint(t *testing.T) {
	_, err := loadYAML(t, base+"objects:\n  compression:\n    enabled: true\n")
	want := `objects: unknown key "compression"; the section's keys are dotted names, written whole, not nested: compression.enabled, compression.level, compression.heuristic.enabled`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("nested: %v", err)
	}
	cfg, err := loadYAML(t, base+"objects:\n  compression.enabled: true\n  chunk.size: 1048576\n")
	if err != nil || !cfg.Objects.Compression || cfg.Objects.ChunkBytes != 1<<20 || !cfg.Objects.Heuristic {
		t.Fatalf("dotted: %+v, %v", cfg.Objects, err)
	}
	if _, err := loadYAML(t, base+"objects:\n  encryption.enabled: true\n"); err == nil || !strings.Contains(err.Error(), "encryption.enabled needs encryption.keys") {
		t.Fatalf("encryption without keys: %v", err)
	}
	if _, err := loadYAML(t, base+"objects:\n  compression.enabled: true\n  chunk.size: 1000\n"); err == nil || !strings.Contains(err.Error(), "chunk.size 1000") {
		t.Fatalf("chunk size: %v", err)
	}
}

// TestObjectsKeysValidated: KEK ids and files are checked when the file
// loads, each problem said once.
func TestObjectsKeysValidated(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"objects:\n  encryption.keys: {\"bad id!\": /k}\n", `encryption key id "bad id!"`},
		{"objects:\n  encryption.enabled: true\n  encryption.keys: {k1: \"\"}\n", `key "k1" has no file`},
		{"objects:\n  encryption.enabled: true\n  encryption.key.id: k2\n  encryption.keys: {k1: /k1}\n", `encryption.key.id "k2" is not in encryption.keys`},
		{"objects:\n  encryption.enabled: true\n  encryption.keys: {k1: /k1, k2: /k2}\n", "encryption.key.id is required with several encryption.keys"},
	} {
		_, err := loadYAML(t, base+c.yaml)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
		if err != nil && strings.Contains(c.want, "no file") && strings.Contains(err.Error(), "not in encryption.keys") {
			t.Errorf("%q: an empty path also reported as an unlisted key: %v", c.yaml, err)
		}
	}
}
