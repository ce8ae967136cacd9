package authz

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// fakeSource gives what it is set to, and counts reads.
type fakeSource struct {
	mu    sync.Mutex
	acls  []kafkaacl.ACL
	err   error
	reads int
}

func (f *fakeSource) ACLs(context.Context) ([]kafkaacl.ACL, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.acls, "fake", f.err
}

func (f *fakeSource) set(acls []kafkaacl.ACL, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acls, f.err = acls, err
}

var aliceReadsOrders = kafkaacl.ACL{ResourceType: kafkaacl.ResourceTopic, ResourceName: "orders", PatternType: kafkaacl.PatternLiteral,
	Principal: "User:alice", Host: "*", Operation: kafkaacl.OpRead, Permission: kafkaacl.Allow}

func aliceReads(a *Authorizer) kafkaacl.Decision {
	return a.Authorize(kafkaacl.Request{Principal: "User:alice", Host: "10.0.0.1", Operation: kafkaacl.OpRead,
		ResourceType: kafkaacl.ResourceTopic, ResourceName: "orders"})
}

// TestLastGoodThenStale: before the first read every request is denied
// (a super user's aside); a failed read keeps the last ACLs deciding for
// MaxStale, then every request is denied until a read succeeds; the
// metrics and Status say so.
func TestLastGoodThenStale(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	src := &fakeSource{}
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.SuperUsers = []string{"User:admin"}
	a, err := New(cfg, src, WithClock(func() time.Time { return now }), WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	if d := aliceReads(a); d.Allowed || d.Rule != RuleNotLoaded {
		t.Fatalf("before the first read: %+v", d)
	}
	if d := a.Authorize(kafkaacl.Request{Principal: "User:admin", Operation: kafkaacl.OpDelete, ResourceType: kafkaacl.ResourceTopic, ResourceName: "x"}); !d.Allowed {
		t.Fatalf("a super user before the first read: %+v", d)
	}
	src.set([]kafkaacl.ACL{aliceReadsOrders}, nil)
	if err := a.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := aliceReads(a); !d.Allowed {
		t.Fatalf("after a read: %+v", d)
	}
	src.set(nil, errors.New("broker unreachable"))
	now = now.Add(time.Minute)
	if err := a.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "broker unreachable") {
		t.Fatalf("failed read: %v", err)
	}
	if d := aliceReads(a); !d.Allowed {
		t.Fatalf("a failed read within max_stale: %+v, want the last ACLs deciding", d)
	}
	if st := a.Status(); st.Stale || st.ACLs != 1 || st.Failures != 1 || st.Error == "" {
		t.Fatalf("status within max_stale: %+v", st)
	}
	now = now.Add(cfg.MaxStale)
	if d := aliceReads(a); d.Allowed || d.Rule != RuleStale {
		t.Fatalf("past max_stale: %+v, want denied as stale", d)
	}
	if st := a.Status(); !st.Stale {
		t.Fatalf("status past max_stale: %+v", st)
	}
	staleWant := "# HELP tierd_acl_stale 1 while reads of the ACLs have failed for longer than max_stale, and every request but a super user's is denied.\n" +
		"# TYPE tierd_acl_stale gauge\ntierd_acl_stale 1\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(staleWant), "tierd_acl_stale"); err != nil {
		t.Fatal(err)
	}
	src.set(nil, nil) // the cluster back, and the ACL revoked
	if err := a.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := aliceReads(a); d.Allowed || d.Rule != "DefaultDeny" {
		t.Fatalf("after the revoke: %+v", d)
	}
	if st := a.Status(); st.Stale || st.Error != "" || st.Failures != 0 {
		t.Fatalf("status after a good read: %+v", st)
	}
	want := "# HELP tierd_acl_refreshes_total Reads of the ACLs from their source (the Kafka cluster or the ACL file), by result (ok, error).\n" +
		"# TYPE tierd_acl_refreshes_total counter\n" +
		"tierd_acl_refreshes_total{result=\"error\"} 1\ntierd_acl_refreshes_total{result=\"ok\"} 2\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tierd_acl_refreshes_total"); err != nil {
		t.Fatal(err)
	}
}

// TestMaxStaleZero: 0 keeps the last ACLs for as long as reads fail.
func TestMaxStaleZero(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	src := &fakeSource{acls: []kafkaacl.ACL{aliceReadsOrders}}
	cfg := DefaultConfig()
	cfg.MaxStale = 0
	a, err := New(cfg, src, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	a.Load(t.Context())
	src.set(nil, errors.New("down"))
	a.Load(t.Context())
	now = now.Add(1000 * time.Hour)
	if d := aliceReads(a); !d.Allowed {
		t.Fatalf("%+v", d)
	}
}

// TestRunRefreshes: Run reads at start, on Refresh and every interval,
// and returns nil when its context ends.
func TestRunRefreshes(t *testing.T) {
	src := &fakeSource{acls: []kafkaacl.ACL{aliceReadsOrders}}
	cfg := DefaultConfig()
	cfg.RefreshInterval, cfg.MaxStale = time.Hour, 2*time.Hour
	a, err := New(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	waitReads := func(n int) {
		t.Helper()
		for i := 0; i < 500; i++ {
			src.mu.Lock()
			r := src.reads
			src.mu.Unlock()
			if r >= n {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("fewer than %d reads", n)
	}
	waitReads(1)
	src.set(nil, nil)
	a.Refresh()
	waitReads(2)
	for i := 0; i < 500 && aliceReads(a).Allowed; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if aliceReads(a).Allowed {
		t.Fatal("the revoke read on Refresh does not decide")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFileSource: an ACL file decides; a bad edit is refused whole, the
// ACLs read before keep deciding, and the error names the line.
func TestFileSource(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acls")
	good := "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n" +
		"\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
	os.WriteFile(p, []byte(good), 0o600)
	a, err := New(DefaultConfig(), FileSource{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !aliceReads(a).Allowed {
		t.Fatal("the file's ACL does not allow")
	}
	os.WriteFile(p, []byte(good+"\t(principal=User:bob, host=*, operation=REED, permissionType=ALLOW)\n"), 0o600)
	err = a.Load(t.Context())
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), p) {
		t.Fatalf("bad edit: %v", err)
	}
	if !aliceReads(a).Allowed {
		t.Fatal("after a bad edit the last good ACLs do not decide")
	}
	os.Remove(p)
	if err := a.Load(t.Context()); err == nil {
		t.Fatal("a missing file read without error")
	}
}

// TestConfigValidate names each problem.
func TestConfigValidate(t *testing.T) {
	c := Config{RefreshInterval: time.Millisecond, MaxStale: -1, SuperUsers: []string{"admin", "User:ok"}}
	err := c.Validate()
	for _, want := range []string{"refresh_interval", "max_stale", `"admin"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %s named: %v", want, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c = DefaultConfig()
	c.MaxStale = time.Second
	if err := c.Validate(); err == nil {
		t.Error("max_stale below refresh_interval accepted")
	}
}

// An ACL file that its group, other users, or an owner other than
// tierd's user or root may write lets them grant themselves anything: it
// is refused, and the ACLs read before keep deciding.
func TestFileSourceWritableByOthers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acls")
	good := "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n" +
		"\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
	os.WriteFile(p, []byte(good), 0o644)
	a, err := New(DefaultConfig(), FileSource{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o666)
	if err := a.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "chmod") {
		t.Fatalf("an ACL file every user may write: %v", err)
	}
	if !aliceReads(a).Allowed {
		t.Fatal("after a refused file the last good ACLs do not decide")
	}
	os.Chmod(p, 0o644)
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	os.Chown(p, 4242, 4242)
	if err := a.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "uid 4242") {
		t.Fatalf("an ACL file of uid 4242: %v", err)
	}
}
