package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// hasRow reports whether out holds a line with these fields, in order.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

// TestConfigShow prints every setting with its source (file, an old
// spelling, default) and whether a reload applies it, and each topic's
// retention and tiering with its source, the cluster's topic configs
// (a kfake cluster with retention.ms set on orders) included.
func TestConfigShow(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("show-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	v := "3600000"
	if res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, "orders"); err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	root := t.TempDir()
	for _, d := range []string{"orders-0", "audit-0", "__consumer_offsets-0"} {
		os.MkdirAll(filepath.Join(root, "logs", d), 0o755)
	}
	p := filepath.Join(root, "tierd.yaml")
	os.WriteFile(p, []byte(fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
  file_delete_delay: 1s
  log.retention.bytes: 1000
  topics:
    audit: {remote.storage.enable: false}
bucket: {filesystem: {dir: %s}}
metadata: {dir: %s}
kafka: {bootstrap_servers: [%s]}
`, filepath.Join(root, "logs"), root, root, kc.ListenAddrs()[0])), 0o644)
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"config", "show", "--config", p}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	s := out.String()
	for _, row := range [][]string{
		{"copier.log.retention.bytes", "1000", "file", "dynamic"},
		{"copier.file.delete.delay.ms", "1000", "file", "(as", "copier.file_delete_delay,", "an", "old", "spelling)", "dynamic"},
		{"copier.log_dirs", "[" + filepath.Join(root, "logs") + "]", "file", "restart", "needed"},
		{"fetch.listen", `"127.0.0.1:7450"`, "default", "restart", "needed"},
		{"fetch.remote.log.manager.fetch.max.bytes.per.second", "9223372036854775807", "default", "dynamic"},
		{"copier.topics.audit.retention.ms", "-", "not", "set:", "inherited", "dynamic"},
		{"orders", "retention.ms", "3600000", "cluster", "(DYNAMIC_TOPIC_CONFIG)"},
		{"orders", "retention.bytes", "1000", "file", "(copier.log.retention.bytes)"},
		{"orders", "remote.storage.enable", "true", "default", "(copier.remote.storage.enable)"},
		{"audit", "retention.ms", "604800000", "default", "(copier.log.retention.ms)"},
		{"audit", "remote.storage.enable", "false", "file", "(copier.topics.audit)"},
	} {
		if !hasRow(s, row...) {
			t.Errorf("config show lacks the row %q:\n%s", strings.Join(row, " "), s)
		}
	}
	if !strings.Contains(s, `cluster show-test answered`) || strings.Contains(s, "__consumer_offsets") {
		t.Errorf("cluster note or internal topic:\n%s", s)
	}
	if !strings.Contains(errOut.String(), "copier.file_delete_delay is now copier.file.delete.delay.ms") {
		t.Errorf("no warning for the old spelling: %s", errOut.String())
	}
	// --cluster=false: the file's values, and a note saying so.
	out.Reset()
	if code := run(ctx, []string{"config", "show", "--cluster=false", "--config", p}, &out, &errOut); code != 0 ||
		!hasRow(out.String(), "orders", "retention.ms", "604800000", "default", "(copier.log.retention.ms)") ||
		!strings.Contains(out.String(), "--cluster=false") {
		t.Errorf("--cluster=false:\n%s", out.String())
	}
}
