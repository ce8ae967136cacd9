package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/seglog"
)

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const reloadYAML = `copier:
  log_dirs: [%s]
  broker_id: 1
  remote.log.manager.task.interval.ms: 100
  log.retention.ms: %d
  initial_retention_delay: 0s
bucket:
  type: filesystem
  filesystem: {dir: %s}
metadata: {dir: %s}
fetch: {listen: "%s"}
http: {listen: ""}
log_level: %s
`

// TestReloadDynamicAndStatic runs tierd (serve, as "tierd run") over a
// partition whose records are two hours old, tiered under the default
// 7-day retention; then tierd.yaml changes a dynamic setting
// (log.retention.ms to one hour, and the log level) and a static one (the
// fetch listen address), and "tierd config reload" signals it. The
// dynamic changes apply (the copies past one hour go at the next pass,
// debug logging starts), the static one is refused with "restart needed"
// and the fetch API stays where it was. A broken file then changes
// nothing.
func TestReloadDynamicAndStatic(t *testing.T) {
	// This test's process receives the SIGHUPs; a handler of its own
	// keeps one arriving outside serve's reloader from ending it.
	hup := make(chan os.Signal, 8)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	root := t.TempDir()
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(filepath.Join(root, "logs", "orders-0"), scfg)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	for i := range 600 {
		l.Append(seglog.Record{Value: demoValue(int64(i)), Timestamp: old})
	}
	l.Close()
	fetchAddr, otherAddr := freeAddr(t), freeAddr(t)
	cfgPath := filepath.Join(root, "tierd.yaml")
	write := func(retentionMs int64, listen, level string) {
		y := fmt.Sprintf(reloadYAML, filepath.Join(root, "logs"), retentionMs, filepath.Join(root, "bucket"), filepath.Join(root, "meta"), listen, level)
		if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(604800000, fetchAddr, "info")
	bucketCreate(t, cfgPath)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	level := new(slog.LevelVar)
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, log, level) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	c, err := grpcapi.Dial(fetchAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	offsets := func() *tierdpb.ListSegmentsResponse {
		resp, err := c.API().ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: "orders", Partition: 0})
		if err != nil {
			return nil
		}
		return resp
	}
	testtools.WaitFor(t, "the copies", func() bool { r := offsets(); return r != nil && r.HighestTieredOffset == 411 })
	if r := offsets(); r.LogStartOffset != 0 {
		t.Fatalf("log start offset %d under 7-day retention", r.LogStartOffset)
	}

	write(3600000, otherAddr, "debug")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"config", "reload", "--config", cfgPath}, &out, &errOut)
	if code != 1 { // something was refused
		t.Fatalf("config reload: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		fmt.Sprintf("tierd pid %d reloaded %s", os.Getpid(), cfgPath),
		"applied: copier.log.retention.ms: 604800000 -> 3600000 (at the next pass)",
		`applied: log_level: "info" -> "debug" (now)`,
		fmt.Sprintf(`refused: fetch.listen: "%s" -> "%s": static setting, restart needed; tierd keeps "%s"`, fetchAddr, otherAddr, fetchAddr),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config reload output lacks %q:\n%s", want, out.String())
		}
	}
	testtools.WaitFor(t, "retention.ms 1h at the next pass", func() bool { r := offsets(); return r != nil && r.LogStartOffset == 412 })
	if level.Level() != slog.LevelDebug || !log.Enabled(context.Background(), slog.LevelDebug) {
		t.Errorf("log level %s after the reload, want DEBUG", level.Level())
	}
	l2 := logs.String()
	for _, want := range []string{
		`msg="config change applied" key=copier.log.retention.ms old=604800000 new=3600000 applies="at the next pass"`,
		fmt.Sprintf(`msg="config change refused: restart needed; the running value stays" key=fetch.listen running=%s file=%s why="static setting, restart needed"`, fetchAddr, otherAddr),
	} {
		if !strings.Contains(l2, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	// The tools find the running tierd where it listens, not at the
	// file's refused address, and say both.
	if code, o, e := runCmd("status", "--config", cfgPath); code != 0 ||
		!strings.Contains(o, fmt.Sprintf("the running tierd (pid %d) at %s; the file says fetch.listen %s (a restart applies it)", os.Getpid(), fetchAddr, otherAddr)) {
		t.Errorf("status after the refused fetch.listen: exit %d\n%s\n%s", code, o, e)
	}

	// A file that does not load changes nothing; SIGHUP never ends tierd.
	os.WriteFile(cfgPath, []byte("copier:\n  log_dir: [/x]\n"), 0o644)
	before, _ := daemon.ReadReload(cfg.Metadata.Dir)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	testtools.WaitFor(t, "the broken file's reload", func() bool { r, _ := daemon.ReadReload(cfg.Metadata.Dir); return r.Seq > before.Seq })
	res, _ := daemon.ReadReload(cfg.Metadata.Dir)
	if !strings.Contains(res.Error, `unknown key "log_dir"; did you mean "log_dirs"?`) || len(res.Applied) != 0 {
		t.Errorf("broken file's reload: %+v", res)
	}
	if level.Level() != slog.LevelDebug || offsets() == nil {
		t.Error("a broken file changed the running tierd")
	}
}

// TestReloadWithoutTierd: with no tierd holding the log dirs, "config
// reload" says so and signals nothing; a file that does not load is
// refused before anything is sent.
func TestReloadWithoutTierd(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	p := filepath.Join(root, "tierd.yaml")
	os.WriteFile(p, []byte(fmt.Sprintf(reloadYAML, filepath.Join(root, "logs"), 1, root, root, "127.0.0.1:0", "info")), 0o644)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"config", "reload", "--config", p}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "no running tierd holds the log dirs") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	os.WriteFile(p, []byte("copier:\n  intervall: 5s\n"), 0o644)
	errOut.Reset()
	if code := run(context.Background(), []string{"config", "reload", "--config", p}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), `unknown key "intervall"; did you mean remote.log.manager.task.interval.ms (formerly interval)?`) {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}
