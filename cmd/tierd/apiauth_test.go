package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	testcerts "github.com/tierd/tierd/internal/testutil/certs"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/proto/tierdpb"
)

// The Admin service on fetch.listen with tokens: a tool with no token or
// with a token of a principal that is not an admin is refused and no
// deletion is scheduled (the journal stays empty); an admin's tool
// schedules it, and the journal names the principal, not a claimed
// operator; a token removed from tokens_file is refused after SIGHUP.
// Tokens come from "tierd api token", whose file is 0600 and never
// printed; they travel only over TLS.
func TestAPITokensEndToEnd(t *testing.T) {
	root := t.TempDir()
	writePartition(t, filepath.Join(root, "logs", "orders-0"), 600, 0)

	token := func(principal string) (file, line string) {
		file = filepath.Join(root, strings.TrimPrefix(principal, "User:")+".token")
		code, o, e := runCmd("api", "token", "--principal", principal, "--token-file", file)
		if code != 0 {
			t.Fatalf("api token: exit %d %s", code, e)
		}
		tok, _ := os.ReadFile(file)
		st, _ := os.Stat(file)
		if st.Mode().Perm() != 0o600 || strings.Contains(o, strings.TrimSpace(string(tok))) || !strings.HasPrefix(o, principal+" sha256:") {
			t.Fatalf("api token: mode %v, printed %q", st.Mode(), o)
		}
		return file, strings.TrimSpace(o)
	}
	opsFile, opsLine := token("User:ops")
	eveFile, eveLine := token("User:eve")
	if code, _, e := runCmd("api", "token", "--principal", "User:ops", "--token-file", opsFile); code != 1 || !strings.Contains(e, "exists") {
		t.Fatalf("api token over an existing file: exit %d %s", code, e)
	}
	tokens := filepath.Join(root, "tokens")
	os.WriteFile(tokens, []byte(opsLine+"\n"+eveLine+"\n"), 0o600)

	fetchAddr := freeAddr(t)
	ca := testcerts.NewCA(t, t.TempDir(), "ca")
	srv := ca.Server(t, "server")
	base := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), fetchAddr, "")
	y := strings.Replace(readFile(t, base), "fetch:\n", "fetch:\n  tokens_file: "+tokens+"\n  admin.principals: [User:ops]\n", 1) +
		fmt.Sprintf("tls:\n  cert_file: %s\n  key_file: %s\n  grpc: tls\n  ca_file: %s\n", srv.CertFile, srv.KeyFile, ca.CAFile)
	cfgPath := filepath.Join(root, "tierd.yaml")
	os.WriteFile(cfgPath, []byte(y), 0o644)
	// A tool elsewhere: no admin socket, maybe a token.
	tool := func(name, tokenFile string) string {
		ty := strings.Replace(y, "fetch:\n", "fetch:\n  admin.socket: "+filepath.Join(root, "nowhere.sock")+"\n", 1)
		if tokenFile != "" {
			ty = strings.Replace(ty, "fetch:\n", "fetch:\n  client.token_file: "+tokenFile+"\n", 1)
		}
		p := filepath.Join(root, name+".yaml")
		os.WriteFile(p, []byte(ty), 0o644)
		return p
	}
	startServe(t, cfgPath)
	c, err := grpcapi.Dial(fetchAddr, grpcapi.WithClientTLS(testcerts.ClientConfig(t, ca, testcerts.Pair{})))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A tool never sends its token over plaintext.
	plain := strings.Replace(readFile(t, tool("ops-plain", opsFile)), "  grpc: tls\n", "  grpc: off\n", 1)
	plain = strings.Replace(plain, "  cert_file: "+srv.CertFile+"\n  key_file: "+srv.KeyFile+"\n", "", 1)
	os.WriteFile(filepath.Join(root, "ops-plain.yaml"), []byte(plain), 0o644)
	if code, _, e := runCmd("topics", "delete", "--config", filepath.Join(root, "ops-plain.yaml"), "orders"); code != 1 || !strings.Contains(e, "only over TLS") {
		t.Fatalf("a token over plaintext: exit %d %s", code, e)
	}
	testtools.WaitFor(t, "orders-0 tiered", func() bool {
		r, err := c.API().ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: "orders"})
		return err == nil && r.HighestTieredOffset == 411
	})
	os.RemoveAll(filepath.Join(root, "logs", "orders-0"))
	journal := func() string {
		code, o, e := runCmd("journal", "--config", cfgPath) // on the admin socket
		if code != 0 {
			t.Fatalf("journal: exit %d %s", code, e)
		}
		return o
	}

	for _, tc := range []struct{ name, file, says string }{
		{"anonymous", "", "Unauthenticated"}, {"eve", eveFile, "PermissionDenied"},
	} {
		code, o, e := runCmd("topics", "delete", "--config", tool(tc.name, tc.file), "orders")
		if code != 1 || !strings.Contains(e, tc.says) {
			t.Errorf("%s: topics delete: exit %d, want 1 saying %s\n%s%s", tc.name, code, tc.says, o, e)
		}
		if j := journal(); strings.TrimSpace(j) != "" {
			t.Fatalf("%s: the journal changed:\n%s", tc.name, j)
		}
	}
	opsTool := tool("ops", opsFile)
	if code, o, e := runCmd("topics", "delete", "--config", opsTool, "orders"); code != 0 || !strings.Contains(o, "orders-0") {
		t.Fatalf("ops: topics delete: exit %d\n%s%s", code, o, e)
	}
	if j := journal(); !strings.Contains(j, "User:ops (host 127.0.0.1)") || strings.Count(strings.TrimSpace(j), "\n") != 0 {
		t.Fatalf("journal after the admin's delete:\n%s", j)
	}
	// Revoked: ops's line leaves the file; after SIGHUP its token fails.
	os.WriteFile(tokens, []byte(eveLine+"\n"), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	testtools.WaitFor(t, "ops's token refused after the reload", func() bool {
		code, _, e := runCmd("partitions", "restore", "--config", opsTool, "orders-0")
		return code == 1 && strings.Contains(e, "Unauthenticated")
	})
}

// A tokens file others may write is refused at start.
func TestAPITokensFileMode(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	tokens := filepath.Join(root, "tokens")
	os.WriteFile(tokens, []byte(grpcapi.TokenLine("User:ops", "x")+"\n"), 0o600)
	os.Chmod(tokens, 0o666)
	base := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), "")
	y := strings.Replace(readFile(t, base), "fetch:\n", "fetch:\n  tokens_file: "+tokens+"\n", 1)
	os.WriteFile(base, []byte(y), 0o644)
	cfg, err := config.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := serve(ctx, cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
		t.Fatalf("tierd run with a tokens file others may write: %v", err)
	}
}

// With http.tokens_file, the status page and /metrics answer 401 without
// a known bearer token (naming the setting, never the token sent) and
// serve with one; the probes stay open.
func TestHTTPTokens(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	tokens := filepath.Join(root, "http-tokens")
	os.WriteFile(tokens, []byte(grpcapi.TokenLine("User:prometheus", "scrape-secret")+"\n"), 0o600)
	httpAddr := freeAddr(t)
	base := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), httpAddr)
	appendFile(t, base, "  tokens_file: "+tokens+"\n") // the file ends in the http: section
	startServe(t, base)
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+httpAddr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testtools.WaitFor(t, "the HTTP endpoint up", func() bool { c, _ := get("/-/healthy", ""); return c == 200 })
	for _, path := range []string{"/", "/metrics"} {
		for _, tok := range []string{"", "guess-secret"} {
			if code, body := get(path, tok); code != http.StatusUnauthorized || !strings.Contains(body, "http: tokens_file") || (tok != "" && strings.Contains(body, tok)) {
				t.Errorf("%s with token %q: %d %q", path, tok, code, body)
			}
		}
		code, body := get(path, "scrape-secret")
		if code != 200 {
			t.Errorf("%s with the token: %d %q", path, code, body)
		}
		// The page says who may reach what, never a secret.
		if path == "/" && (!strings.Contains(body, "bearer token required (1 token)") || !strings.Contains(body, "admin socket only for Admin") ||
			!strings.Contains(body, "none: every client reads") || strings.Contains(body, "scrape-secret")) {
			t.Errorf("the page's security facts:\n%s", body)
		}
	}
	if code, _ := get("/-/ready", ""); code != 200 && code != http.StatusServiceUnavailable {
		t.Errorf("/-/ready without a token: %d", code)
	}
}

// A metadata dir too deep for a Unix socket path gets its admin socket in
// the temporary dir, at a path tierd and its tools agree on.
func TestAdminSocketPathTooLong(t *testing.T) {
	cfg := config.Default()
	cfg.Metadata.Dir = "/var/lib/" + strings.Repeat("deep/", 25) + "rlmm"
	p := daemon.AdminSocket(cfg)
	if len(p) > grpcapi.MaxSocketPath || !strings.HasPrefix(p, os.TempDir()) || daemon.AdminSocket(cfg) != p {
		t.Fatalf("admin socket %q", p)
	}
	other := cfg
	other.Metadata.Dir += "2"
	if daemon.AdminSocket(other) == p {
		t.Fatal("two metadata dirs share a socket")
	}
	cfg.Metadata.Dir = "/var/lib/tierd"
	if p := daemon.AdminSocket(cfg); p != "/var/lib/tierd/admin/tierd.sock" {
		t.Fatalf("short: %q", p)
	}
}

// "tierd segments" by a caller the ACLs let describe one topic of two:
// the other's partitions are listed as not shown, and the rest is
// printed.
func TestSegmentsHidesDeniedTopics(t *testing.T) {
	root := t.TempDir()
	for _, topic := range []string{"orders", "secret"} {
		writePartition(t, filepath.Join(root, "logs", topic+"-0"), 600, 0)
	}
	tokens, eveFile := filepath.Join(root, "tokens"), filepath.Join(root, "eve.token")
	os.WriteFile(eveFile, []byte("eve-secret\n"), 0o600)
	os.WriteFile(tokens, []byte(grpcapi.TokenLine("User:eve", "eve-secret")+"\n"), 0o600)
	acls := filepath.Join(root, "acls")
	os.WriteFile(acls, []byte("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n"+
		"\t(principal=User:eve, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"), 0o600)
	ca := testcerts.NewCA(t, t.TempDir(), "ca")
	srv := ca.Server(t, "server")
	base := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), "")
	y := strings.Replace(readFile(t, base), "fetch:\n", "fetch:\n  tokens_file: "+tokens+"\n", 1) +
		fmt.Sprintf("tls:\n  cert_file: %s\n  key_file: %s\n  grpc: tls\n  ca_file: %s\nacls: {source: file, file: %s}\n", srv.CertFile, srv.KeyFile, ca.CAFile, acls)
	cfgPath := filepath.Join(root, "tierd.yaml")
	os.WriteFile(cfgPath, []byte(y), 0o644)
	startServe(t, cfgPath)
	// Up first (a tool that finds no tierd opens its metadata itself).
	testtools.WaitFor(t, "the admin socket", func() bool {
		c, err := grpcapi.Dial("unix://" + filepath.Join(root, "metadata", "admin", "tierd.sock"))
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = c.Admin().Identity(context.Background(), &tierdpb.IdentityRequest{})
		return err == nil
	})
	testtools.WaitFor(t, "both topics tiered", func() bool {
		_, o, _ := runCmd("segments", "--config", cfgPath) // the admin socket: everything
		return strings.Contains(o, "orders-0: log start offset 0") && strings.Contains(o, "secret-0: log start offset 0")
	})
	eve := filepath.Join(root, "eve.yaml")
	os.WriteFile(eve, []byte(strings.Replace(y, "fetch:\n", "fetch:\n  admin.socket: "+filepath.Join(root, "none.sock")+"\n  client.token_file: "+eveFile+"\n", 1)), 0o644)
	code, o, e := runCmd("segments", "--config", eve)
	if code != 0 || !strings.Contains(o, "orders-0: log start offset 0") || !strings.Contains(o, "secret-0: not shown") || strings.Contains(o, "secret-0: log start") {
		t.Fatalf("segments as eve: exit %d\n%s%s", code, o, e)
	}
}
