package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// keptConfig loads the tierd.yaml that "tierd demo --keep DIR" wrote,
// checks that it names the run's prefix, and returns a copy whose fetch
// address is a free port (so that "tierd segments" cannot reach another
// tierd serving the default one on this machine).
func keptConfig(t *testing.T, keep, prefix string) string {
	t.Helper()
	cfg, err := config.Load(filepath.Join(keep, "tierd.yaml"))
	if err != nil {
		t.Fatalf("kept tierd.yaml: %v", err)
	}
	if cfg.Bucket.Prefix != prefix {
		t.Errorf("kept tierd.yaml names prefix %q, the run wrote under %q", cfg.Bucket.Prefix, prefix)
	}
	cfg.Fetch.Listen = freeAddr(t)
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tierd.yaml")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDemoOwnPrefixOverMinIO runs the demo against a MinIO bucket that
// holds other objects: a run whose prefix is taken is refused before it
// writes anything; a run with --keep and --s3-prefix writes only under
// <prefix>/tierd-demo-<random>/, keeps its objects there, and its kept
// tierd.yaml lists them; the other objects are untouched throughout.
func TestDemoOwnPrefixOverMinIO(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "tierd")
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure = srv.Endpoint, "tierd", true
	b, err := minio.New(mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"tierd-demo-taken/demo-0/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA.log", "demo-0/_owner.json", "team/demo-0/_owner.json"} {
		if err := b.Upload(ctx, k, strings.NewReader("another tierd's "+k), -1); err != nil {
			t.Fatal(err)
		}
	}
	before := rsmtest.Snapshot(t, b, "")
	endpoint := "http://" + srv.Endpoint

	var out bytes.Buffer
	err = demo(ctx, demoOptions{s3Endpoint: endpoint, s3Bucket: "tierd", s3Region: "us-east-1", runID: "taken"}, &out, &out)
	if !errors.Is(err, rsm.ErrPrefixNotEmpty) || !strings.Contains(err.Error(), "tierd-demo-taken/demo-0/") {
		t.Fatalf("demo on a taken prefix: %v\n%s", err, out.String())
	}
	if d := rsmtest.Diff(before, rsmtest.Snapshot(t, b, "")); d != "" {
		t.Fatalf("the refused demo changed the bucket:\n%s", d)
	}

	keep := filepath.Join(t.TempDir(), "keep")
	out.Reset()
	if err := demo(ctx, demoOptions{keep: keep, s3Endpoint: endpoint, s3Bucket: "tierd", s3Region: "us-east-1", s3Prefix: "team"}, &out, &out); err != nil {
		t.Fatalf("demo --keep: %v\n%s", err, out.String())
	}
	after := rsmtest.Snapshot(t, b, "")
	var runPrefix string
	for k := range after {
		if _, ok := before[k]; ok {
			continue
		}
		p, _, ok := strings.Cut(k, "/demo-0/")
		if !ok {
			p, _, ok = strings.Cut(k, "/demo-keyed-0/")
		}
		if !ok || !strings.HasPrefix(p, "team/tierd-demo-") || (runPrefix != "" && p != runPrefix) {
			t.Errorf("the demo wrote %s, outside one team/tierd-demo-<id>/ prefix", k)
		}
		runPrefix = p
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed or went missing", k)
		}
	}
	if runPrefix == "" || !strings.Contains(out.String(), "objects under "+runPrefix+"/ in s3:") {
		t.Fatalf("no objects kept under the run's prefix %q:\n%s", runPrefix, out.String())
	}
	code, o, e := runCmd("segments", "--config", keptConfig(t, keep, runPrefix))
	if code != 0 || !strings.Contains(o, "demo-0: log start offset 0, local log start offset 600, highest tiered offset 599") {
		t.Fatalf("segments with the kept tierd.yaml: exit %d\n%s\n%s", code, o, e)
	}
}

// TestDemoSilentEndpoint: a demo against an S3 endpoint that takes the
// connection and never answers gives up, saying which endpoint did not
// answer, instead of hanging.
func TestDemoSilentEndpoint(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "demo")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "demo-secret")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // takes connections and says nothing
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	endpoint := "http://" + l.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	err = demo(ctx, demoOptions{s3Endpoint: endpoint, s3Bucket: "tierd", s3Region: "us-east-1", answerTimeout: 300 * time.Millisecond}, &out, &out)
	if ctx.Err() != nil {
		t.Fatalf("the demo hung until the test's deadline: %v\n%s", err, out.String())
	}
	if err == nil || !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Fatalf("demo against a silent endpoint: %v (after %s)\n%s", err, time.Since(start), out.String())
	}
}

// TestDemoObjects: "tierd demo --objects --keep DIR" stores every copy
// chunked, compressed and encrypted under a KEK of its own (a 0600 file
// under DIR/keys, listed in the kept tierd.yaml), says so in its segment
// table, reads every record back, leaves no record's bytes readable in
// the bucket, and "tierd verify" with the kept config checks the copies.
func TestDemoObjects(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "keep")
	var out bytes.Buffer
	if err := demo(context.Background(), demoOptions{keep: keep, objects: true}, &out, &out); err != nil {
		t.Fatalf("demo --objects: %v\n%s", err, out.String())
	}
	o := out.String()
	if strings.Count(o, "COPY_SEGMENT_FINISHED  chunked+enc ") != 3 || !strings.Contains(o, "600/600 records read back\n") ||
		!strings.Contains(o, `encrypted under key-encryption key "demo"`) {
		t.Fatalf("demo --objects output:\n%s", o)
	}
	kek := filepath.Join(keep, "keys", "demo.kek")
	if st, err := os.Stat(kek); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the demo's KEK file: %v %v", st, err)
	}
	key, err := os.ReadFile(kek)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(o, strings.TrimSpace(string(key))) {
		t.Fatal("the demo printed its key")
	}
	var logs int
	err = filepath.WalkDir(filepath.Join(keep, "bucket"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".log") {
			logs++
		}
		if bytes.Contains(data, demoValue(5)[:20]) || bytes.Contains(data, bytes.Repeat([]byte{'f'}, 64)) {
			t.Errorf("%s holds a record's bytes in the clear", p)
		}
		return nil
	})
	if err != nil || logs < 3 {
		t.Fatalf("bucket walk: %v, %d .log objects", err, logs)
	}
	cfg, err := config.Load(filepath.Join(keep, "tierd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Objects.Encryption || !cfg.Objects.Compression || cfg.Objects.EncryptionKeys["demo"] != kek {
		t.Fatalf("kept objects settings %+v", cfg.Objects)
	}
	code, vo, ve := runCmd("verify", "--config", keptConfig(t, keep, cfg.Bucket.Prefix))
	if code != 0 || !strings.Contains(vo, " ok, 0 mismatched") || !strings.Contains(vo, "in chunked form, every chunk decoded and checked") {
		t.Fatalf("verify with the kept config: exit %d\n%s%s", code, vo, ve)
	}
}
