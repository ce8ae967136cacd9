package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tierd/tierd/copier/topics"
)

func TestConfigStrict(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte("copier:\n  log_dirs: [/x]\n  retention:\n    retention.msec: 5\nmetadata: {dir: /m}\n"), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "retention.msec") {
		t.Errorf("unknown key: %v", err)
	}
	os.WriteFile(p, []byte("copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {type: gcs}\nlog_level: loud\n"), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "gcs") || !strings.Contains(err.Error(), "loud") {
		t.Errorf("bad values: %v", err)
	}
	os.WriteFile(p, []byte("copier:\n  log_dirs: [/x]\n  broker_id: 3\n  topics:\n    orders: {retention.bytes: 100}\nmetadata: {dir: /m}\nbucket:\n  filesystem: {dir: /b}\n"), 0o644)
	cfg, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if l := topics.Resolve("orders", cfg.Copier.TopicDefaults(), cfg.Copier.Topics["orders"], nil).Limits; l.RetentionBytes != 100 || l.LocalRetentionBytes != 100 || l.RetentionMs != 604800000 {
		t.Errorf("topic override: %+v", l)
	}
	if cfg.Fetch.Listen != "127.0.0.1:7450" || cfg.Copier.TaskIntervalMs != 30000 {
		t.Errorf("defaults lost: %+v", cfg.Fetch)
	}
}

func TestConfigRejects(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"fraction": {"copier:\n  log_dirs: [/x]\n  retention:\n    retention.ms: 0.5\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n", "whole numbers"},
		"two docs": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n---\nbogus: 1\n", "more than one YAML document"},
		"acls from no cluster": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nacls: {source: cluster}\n",
			"acls: source cluster needs kafka.bootstrap_servers"},
		"acls of no file": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nacls: {source: file}\n",
			"acls: source file needs file"},
		"open beyond loopback": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nkafka: {listen: 0.0.0.0:9192}\n",
			"reaches beyond loopback, but authenticates nobody"},
		"listeners and listen": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nkafka: {listen: 127.0.0.1:1, listeners: \"PLAINTEXT://127.0.0.1:2\"}\n",
			"listeners replaces listen"},
		"SASL listener without mechanisms": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nkafka: {listeners: \"SASL_PLAINTEXT://127.0.0.1:2\"}\n",
			"listener SASL_PLAINTEXT is SASL_PLAINTEXT: it needs sasl.enabled.mechanisms"},
		"SSL listener without tls": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nkafka: {listeners: \"SSL://127.0.0.1:2\"}\n",
			"it needs tls.kafka: tls or mtls"},
		"open second listener": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nkafka: {listeners: \"INTERNAL://127.0.0.1:2,EXTERNAL://0.0.0.0:3\", listener.security.protocol.map: \"INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT\"}\n",
			"listener EXTERNAL on 0.0.0.0:3 reaches beyond loopback"},
		"mechanisms without a SASL listener": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nkafka: {listeners: \"PLAINTEXT://127.0.0.1:2\", sasl.enabled.mechanisms: [PLAIN], sasl.credentials.file: /c}\n",
			"no listener is SASL_PLAINTEXT or SASL_SSL"},
		"acls source": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nacls: {source: ldap}\n", `acls: source "ldap"`},
		"acls super user": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nacls: {source: file, file: /a, super.users: [admin]}\n",
			`super user "admin" is not a principal`},
		"empty":    {"\n", "empty"},
		"bad port": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nhttp: {listen: \"127.0.0.1:99999\"}\n", "0 to 65535"},
		"no dir":   {"copier:\n  log_dirs: [/x]\nbucket: {filesystem: {dir: /b}}\n", "metadata: rlmm: dir is required"},
		"kafka without broker_id": {"copier:\n  log_dirs: [/x]\n  ownership_lease: 0s\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\nkafka: {bootstrap_servers: [\"127.0.0.1:9092\"]}\n",
			"broker_id is required with kafka.bootstrap_servers"},
		"bad delete delay": {"copier:\n  log_dirs: [/x]\n  broker_id: 1\n  remote.log.delete.delay.ms: -1\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n",
			"remote.log.delete.delay.ms -1"},
		"no broker_id": {"copier:\n  log_dirs: [/x]\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n",
			"broker_id is required with ownership_lease"},
	} {
		p := filepath.Join(dir, name+".yaml")
		os.WriteFile(p, []byte(tc.yaml), 0o644)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// TestExampleConfig keeps tierd.example.yaml loadable and equal to the
// defaults it claims, where it does not override them.
func TestExampleConfig(t *testing.T) {
	cfg, err := Load("../tierd.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def := Default()
	if !reflect.DeepEqual(cfg.Fetch, def.Fetch) || cfg.Copier.TaskIntervalMs != def.Copier.TaskIntervalMs || cfg.Copier.FileDeleteDelayMs != def.Copier.FileDeleteDelayMs ||
		cfg.Bucket.MinIO.PartSize != def.Bucket.MinIO.PartSize || cfg.HTTP != def.HTTP ||
		cfg.Copier.RemoteLogDeleteDelayMs != def.Copier.RemoteLogDeleteDelayMs || cfg.Copier.ClusterTopicConfigs != def.Copier.ClusterTopicConfigs ||
		cfg.Copier.CopyChecksPerPass != def.Copier.CopyChecksPerPass || cfg.Kafka.Cluster.Enabled() ||
		cfg.Kafka.Cluster.ClientID != def.Kafka.Cluster.ClientID || cfg.Kafka.Cluster.RequestTimeout != def.Kafka.Cluster.RequestTimeout {
		t.Errorf("example differs from the defaults it documents: %+v", cfg)
	}
	// The per-topic example is commented out: a topic named orders gets the
	// defaults, not an override it never asked for.
	if l := topics.Resolve("orders", cfg.Copier.TopicDefaults(), cfg.Copier.Topics["orders"], nil).Limits; l.LocalRetentionMs != 604800000 || l.RetentionMs != 604800000 || len(cfg.Copier.Topics) != 0 {
		t.Errorf("example topic override applies: %+v", l)
	}
	c, d := cfg.Copier, def.Copier
	if c.CopierThreadPoolSize != d.CopierThreadPoolSize || c.CopyMaxBytesPerSecond != d.CopyMaxBytesPerSecond || c.RemoteStorageEnable != d.RemoteStorageEnable ||
		c.FileDeleteDelayMs != d.FileDeleteDelayMs || *c.Retention.RetentionMs != *d.Retention.RetentionMs || *c.Retention.LocalRetentionBytes != *d.Retention.LocalRetentionBytes ||
		c.BrokerOwned != nil || c.InitialRetentionDelay != d.InitialRetentionDelay {
		t.Errorf("example copier differs from the defaults it documents: %+v", c)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("the example uses old spellings: %v", w)
	}
	if a := cfg.ACLs; len(a.SuperUsers) == 0 && a.SuperUsers != nil {
		a.SuperUsers = nil
		cfg.ACLs = a
	}
	if !reflect.DeepEqual(cfg.ACLs, def.ACLs) {
		t.Errorf("example acls differ from the defaults they document: %+v", cfg.ACLs)
	}
	r, dr := cfg.RSM, def.RSM
	if len(r.LogDirs) != 0 {
		t.Errorf("example rsm.log_dirs: %v, want none (the default)", r.LogDirs)
	}
	r.LogDirs, dr.LogDirs = nil, nil
	if !reflect.DeepEqual(r, dr) || cfg.TLS.RSM != "off" {
		t.Errorf("example rsm differs from the defaults it documents: %+v (tls.rsm %q)", r, cfg.TLS.RSM)
	}
}

// TestRemoteCompactionConfig loads copier.remote_compaction, its one
// fractional setting included, and refuses fractions elsewhere in it and
// out-of-range values.
func TestRemoteCompactionConfig(t *testing.T) {
	dir := t.TempDir()
	base := "copier:\n  log_dirs: [/x]\n  broker_id: 1\n  topics: {orders: {cleanup.policy: compact}}\n  remote_compaction: %s\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n"
	load := func(rc string) (Config, error) {
		p := filepath.Join(dir, "tierd.yaml")
		if err := os.WriteFile(p, []byte(strings.Replace(base, "%s", rc, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(p)
	}
	cfg, err := load("{min.cleanable.dirty.ratio: 0.25, segment.bytes: 1000, delete.retention.ms: 5}")
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.Copier.RemoteCompaction
	if !rc.Enable || rc.MinCleanableDirtyRatio != 0.25 || rc.SegmentBytes != 1000 || rc.DeleteRetentionMs != 5 ||
		*cfg.Copier.Topics["orders"].CleanupPolicy != "compact" {
		t.Fatalf("loaded %+v", rc)
	}
	for rc, want := range map[string]string{
		"{segment.bytes: 1000.5}":          "whole numbers",
		"{min.cleanable.dirty.ratio: 1.5}": "min.cleanable.dirty.ratio 1.5 is out of range",
		"{segment.bytes: 10}":              "segment.bytes 10 is out of range",
		"{delete.retention.ms: -1}":        "delete.retention.ms -1 must not be negative",
	} {
		if _, err := load(rc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", rc, err, want)
		}
	}
}

// TestLocalRetentionKeysApart: a file setting only log.local.retention.ms
// leaves log.local.retention.bytes at -2 (same as retention.bytes); the
// defaults once shared one variable, so the ms value became a byte limit.
func TestLocalRetentionKeysApart(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tierd.yaml")
	yaml := "copier:\n  log_dirs: [" + dir + "]\n  log.local.retention.ms: 3600000\n  ownership_lease: 0s\nbucket:\n  filesystem: {dir: " + dir + "/b}\nmetadata:\n  dir: " + dir + "/m\n"
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Copier.Retention
	if *r.LocalRetentionMs != 3600000 || *r.LocalRetentionBytes != -2 {
		t.Fatalf("log.local.retention.ms %d, log.local.retention.bytes %d; want 3600000 and -2", *r.LocalRetentionMs, *r.LocalRetentionBytes)
	}
}

// TestComposeConfigsLoad: the configs the compose files mount are
// accepted as they are (key names, values, their checks).
func TestComposeConfigsLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "minio", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no compose configs: %v", err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestRunTLSConfig checks the tls: section's errors.
func TestRunTLSConfig(t *testing.T) {
	dir := t.TempDir()
	base := "copier:\n  log_dirs: [/x]\n  broker_id: 1\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\ntls:\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"bad mode":         {"  grpc: yes\n", `grpc "yes": want off, tls or mtls`},
		"key only":         {"  http: tls\n  key_file: k\n", "cert_file and key_file go together"},
		"CA without mtls":  {"  cert_file: c\n  key_file: k\n  kafka: tls\n  client_ca_file: ca\n", "no endpoint is mtls"},
		"cert all off":     {"  cert_file: c\n  key_file: k\n", "all off"},
		"client cert only": {"  client_cert_file: c\n", "client_cert_file and client_key_file go together"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		os.WriteFile(p, []byte(base+tc.yaml), 0o644)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// TestServerTLS: what only the server needs is ValidateServe's: a
// certificate for an endpoint that is on, client_ca_file for an mtls one.
// A tool's config without them loads.
func TestServerTLS(t *testing.T) {
	base := "copier:\n  log_dirs: [/x]\n  broker_id: 1\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\ntls:\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"no cert":         {"  http: tls\n", "cert_file and key_file are required"},
		"mtls without CA": {"  cert_file: c\n  key_file: k\n  kafka: mtls\n", "client_ca_file is required"},
		"a tool's, mtls":  {"  grpc: mtls\n  ca_file: ca\n  client_cert_file: c\n  client_key_file: k\n", "cert_file and key_file are required"},
	} {
		cfg, err := loadYAML(t, base+tc.yaml)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := cfg.TLS.ValidateServe(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: serve: %v, want %q", name, err, tc.want)
		}
	}
	cfg, err := loadYAML(t, base+"  grpc: mtls\n  cert_file: c\n  key_file: k\n  client_ca_file: ca\n")
	if err != nil || cfg.TLS.ValidateServe() != nil {
		t.Errorf("a server's mtls: %v %v", err, cfg.TLS.ValidateServe())
	}
}

// TestSecurityDocTLSExamples: each tls: example of docs/security.md loads
// (over a minimal config), the tool-side one, which names only the CA it
// trusts, too; the server-side ones pass ValidateServe.
func TestSecurityDocTLSExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	base := "copier:\n  log_dirs: [/x]\n  broker_id: 1\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n"
	tool := 0
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, "tls:") || !strings.Contains(block, "ca_file") {
			continue
		}
		cfg, err := loadYAML(t, base+block)
		if err != nil {
			t.Errorf("the example\n%s\ndoes not load: %v", block, err)
			continue
		}
		if cfg.TLS.CertFile == "" {
			tool++
		} else if err := cfg.TLS.ValidateServe(); err != nil {
			t.Errorf("the server's example\n%s\n%v", block, err)
		}
	}
	if tool == 0 {
		t.Error("docs/security.md has no tool-side tls: example (ca_file without cert_file)")
	}
}

// TestOpenListenerNeedsConsent: a Kafka listener beyond loopback that
// authenticates nobody and applies no ACLs is refused, unless
// allow.unauthenticated says so; on loopback, or with SASL, mtls or
// acls, it is accepted.
func TestOpenListenerNeedsConsent(t *testing.T) {
	dir := t.TempDir()
	base := "copier:\n  log_dirs: [/x]\n  broker_id: 1\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n"
	for name, tc := range map[string]struct {
		yaml string
		ok   bool
	}{
		"open":        {base + "kafka: {listen: 0.0.0.0:9192}\n", false},
		"consented":   {base + "kafka: {listen: 0.0.0.0:9192, allow.unauthenticated: true}\n", true},
		"loopback":    {base + "kafka: {listen: 127.0.0.1:9192}\n", true},
		"with acls":   {base + "kafka: {listen: 0.0.0.0:9192}\nacls: {source: file, file: /a}\n", true},
		"with logins": {base + "kafka: {listen: '[::]:9192', sasl.enabled.mechanisms: [PLAIN], sasl.credentials.file: /c}\n", true},
	} {
		p := filepath.Join(dir, name+".yaml")
		os.WriteFile(p, []byte(tc.yaml), 0o600)
		_, err := Load(p)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", name, err, tc.ok)
		}
	}
}

// metrics.partition.labels.max is read from the file, defaults to 1000
// and may not be negative.
func TestMetricsConfig(t *testing.T) {
	dir := t.TempDir()
	base := "copier:\n  log_dirs: [/x]\n  broker_id: 1\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n"
	for _, tc := range []struct {
		extra string
		want  int
		err   string
	}{
		{"", 1000, ""},
		{"metrics:\n  partition.labels.max: 5\n", 5, ""},
		{"metrics:\n  partition.labels.max: -1\n", 0, "partition.labels.max -1 must be 0 or more"},
	} {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(base+tc.extra), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(p)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want %q", tc.extra, err, tc.err)
		case tc.err == "" && (err != nil || cfg.Metrics.PartitionLabelsMax != tc.want):
			t.Errorf("%q: %d %v, want %d", tc.extra, cfg.Metrics.PartitionLabelsMax, err, tc.want)
		}
	}
}

// TestBothSpellingsOneError: interval: next to its new key is one error,
// "not both", not also an unknown key (interval is a known old spelling).
func TestBothSpellingsOneError(t *testing.T) {
	_, err := loadYAML(t, strings.Replace(base, "  broker_id: 1\n", "  broker_id: 1\n  interval: 5s\n  remote.log.manager.task.interval.ms: 5000\n", 1))
	if err == nil || !strings.Contains(err.Error(), "not both") || strings.Contains(err.Error(), "unknown key") {
		t.Fatalf("both spellings: %v", err)
	}
}

// TestTopicNames: a per-topic entry whose name Kafka refuses (Topic.validate)
// is refused, with the part of the rule it breaks; a legal one loads.
func TestTopicNames(t *testing.T) {
	long := strings.Repeat("t", 250)
	for name, want := range map[string]string{
		`""`:         `copier: topics: "": topic name is illegal, it can't be empty`,
		`"."`:        `copier: topics: ".": topic name cannot be "." or ".."`,
		`".."`:       `copier: topics: "..": topic name cannot be "." or ".."`,
		long:         "it can't be longer than 249 characters (it has 250)",
		`"a b"`:      `topic name "a b" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`,
		`"orders/x"`: "a character other than ASCII alphanumerics",
		`"ordrés"`:   "a character other than ASCII alphanumerics",
	} {
		_, err := loadYAML(t, strings.Replace(base, "broker_id: 1", "broker_id: 1\n  topics:\n    "+name+": {retention.ms: 5}", 1))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Kafka's rule for topic names") {
			t.Errorf("topic %s: %v, want %q", name, err, want)
		}
	}
	for _, name := range []string{"orders", "a.b_c-D9", strings.Repeat("t", 249), "__consumer_offsets"} {
		if _, err := loadYAML(t, strings.Replace(base, "broker_id: 1", "broker_id: 1\n  topics:\n    "+name+": {retention.ms: 5}", 1)); err != nil {
			t.Errorf("topic %s: %v", name, err)
		}
	}
}
