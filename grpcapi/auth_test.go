package grpcapi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/remotelog"
	testcerts "github.com/tierd/tierd/internal/testutil/certs"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/internal/tlsreload"
	"github.com/tierd/tierd/proto/tierdpb"
)

// recordingOperator records the commands it is given.
type recordingOperator struct {
	mu   sync.Mutex
	whos []string
}

func (r *recordingOperator) DeleteTopic(_ context.Context, topic, _, who string) ([]remotelog.PartitionDeletion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.whos = append(r.whos, "delete "+topic+" by "+who)
	return []remotelog.PartitionDeletion{{TopicPartition: remotelog.TopicPartition{Topic: topic}, Proof: who}}, nil
}

func (r *recordingOperator) RestorePartition(_ context.Context, tp remotelog.TopicPartition, _, who string) (remotelog.PartitionDeletion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.whos = append(r.whos, "restore "+tp.Topic+" by "+who)
	return remotelog.PartitionDeletion{TopicPartition: tp}, nil
}

func (r *recordingOperator) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.whos...)
}

// listedLog lists fixed partitions.
type listedLog struct {
	DeletionLog
	tps []remotelog.TopicPartition
}

func (l listedLog) Partitions() ([]remotelog.TopicPartition, error) { return l.tps, nil }

// aclAuthorizer is Kafka's rules over a fixed ACL set.
type aclAuthorizer struct {
	set *kafkaacl.Set
	z   kafkaacl.Authorizer
}

func (a aclAuthorizer) Authorize(r kafkaacl.Request) kafkaacl.Decision {
	return a.z.Authorize(a.set, r)
}

func newACLs(t *testing.T, text string) aclAuthorizer {
	t.Helper()
	acls, err := kafkaacl.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	set, err := kafkaacl.NewSet(acls)
	if err != nil {
		t.Fatal(err)
	}
	return aclAuthorizer{set: set}
}

func tokens(t *testing.T, lines ...string) *TokenSet {
	t.Helper()
	var ts TokenSet
	if err := ts.Set(strings.NewReader(strings.Join(lines, "\n"))); err != nil {
		t.Fatal(err)
	}
	return &ts
}

func dialToken(t *testing.T, addr, token string, opts ...DialOption) tierdpb.AdminClient {
	t.Helper()
	if token != "" {
		opts = append(opts, WithToken(token))
	}
	c, err := Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Admin()
}

// Without a way for callers to authenticate, the Admin service is not on
// TCP at all: a deletion cannot be scheduled there, only on the admin
// socket, whose caller the kernel names.
func TestAdminNotOnTCPWithoutAuth(t *testing.T) {
	op := &recordingOperator{}
	e := newEnv(t, DefaultConfig(), WithAdmin(op, e0(t), Identity{InstanceID: "i"}))
	if _, err := e.client.Admin().DeleteTopic(context.Background(), &tierdpb.DeleteTopicRequest{Topic: "orders"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("DeleteTopic on TCP without auth: %v, want Unimplemented", err)
	}
	if _, err := e.client.Admin().Identity(context.Background(), &tierdpb.IdentityRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Identity on TCP without auth: %v", err)
	}
	if c := op.calls(); len(c) != 0 {
		t.Fatalf("operator called: %v", c)
	}
	if _, err := e.local.Admin().DeleteTopic(context.Background(), &tierdpb.DeleteTopicRequest{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	if c := op.calls(); len(c) != 1 || !strings.Contains(c[0], "(admin socket, uid ") {
		t.Fatalf("operator calls %v, want one by the socket's caller", c)
	}
}

// With tokens: an anonymous caller and a wrong token are Unauthenticated,
// a known principal that is neither admin nor granted is PermissionDenied,
// and nothing reaches the operator; an admin principal's command is
// recorded under its principal and host, whatever operator it claims.
func TestAdminTokens(t *testing.T) {
	op := &recordingOperator{}
	ts := tokens(t, TokenLine("User:ops", "ops-secret"), TokenLine("User:eve", "eve-secret"))
	e := newEnv(t, DefaultConfig(), WithAdmin(op, e0(t), Identity{InstanceID: "i"}),
		WithAuth(Auth{Tokens: ts, AdminPrincipals: []string{"User:ops"}}))
	ctx := context.Background()
	del := &tierdpb.DeleteTopicRequest{Topic: "orders", Operator: "root@elsewhere"}
	for _, tc := range []struct {
		token string
		want  codes.Code
	}{{"", codes.Unauthenticated}, {"guess", codes.Unauthenticated}, {"eve-secret", codes.PermissionDenied}} {
		_, err := dialToken(t, e.addr, tc.token).DeleteTopic(ctx, del)
		if status.Code(err) != tc.want {
			t.Errorf("token %q: %v, want %s", tc.token, err, tc.want)
		}
		if strings.Contains(status.Convert(err).Message(), "secret") {
			t.Errorf("the answer shows a token: %v", err)
		}
	}
	if _, err := dialToken(t, e.addr, "").Identity(ctx, &tierdpb.IdentityRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("anonymous Identity: %v", err)
	}
	if _, err := dialToken(t, e.addr, "eve-secret").Identity(ctx, &tierdpb.IdentityRequest{}); err != nil {
		t.Errorf("authenticated Identity: %v", err)
	}
	if c := op.calls(); len(c) != 0 {
		t.Fatalf("refused callers reached the operator: %v", c)
	}
	if _, err := dialToken(t, e.addr, "ops-secret").DeleteTopic(ctx, del); err != nil {
		t.Fatal(err)
	}
	if c := op.calls(); len(c) != 1 || c[0] != "delete orders by User:ops (host 127.0.0.1)" {
		t.Fatalf("operator calls %v", c)
	}
	// Reads stay open without an Authorizer (every caller reads).
	readtest.ReferenceLog(t, e.Rig)
	if _, err := e.fetch(0, 1); err != nil {
		t.Errorf("anonymous read without ACLs: %v", err)
	}
}

// With ACLs, Kafka's operations decide: READ to fetch, DESCRIBE to list
// offsets, DELETE to delete a topic's remote data, ALTER to restore a
// partition; listings show only what the caller may describe.
func TestAuthACLs(t *testing.T) {
	op := &recordingOperator{}
	ts := tokens(t, TokenLine("User:app", "app-secret"), TokenLine("User:desc", "desc-secret"), TokenLine("User:ops", "ops-secret"))
	acls := newACLs(t, `
Current ACLs for resource `+"`"+`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`+"`"+`:
 	(principal=User:app, host=*, operation=READ, permissionType=ALLOW)
 	(principal=User:desc, host=*, operation=DESCRIBE, permissionType=ALLOW)
 	(principal=User:ops, host=*, operation=DELETE, permissionType=ALLOW)
`)
	dl := listedLog{DeletionLog: e0(t), tps: []remotelog.TopicPartition{{Topic: "t"}, {Topic: "secret"}}}
	e := newEnv(t, DefaultConfig(), WithAdmin(op, dl, Identity{}), WithAuth(Auth{Tokens: ts, Authorizer: acls}))
	readtest.ReferenceLog(t, e.Rig)
	ctx := context.Background()
	read := func(token string) error {
		c, err := Dial(e.addr, WithToken(token))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.API().Fetch(ctx, &tierdpb.FetchRequest{Topic: "t", Offset: 0, MaxBytes: 1})
		return err
	}
	offsets := func(token string) error {
		c, err := Dial(e.addr, WithToken(token))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.API().ListOffsets(ctx, &tierdpb.ListOffsetsRequest{Topic: "t", Spec: tierdpb.OffsetSpec_EARLIEST})
		return err
	}
	if err := read("app-secret"); err != nil {
		t.Errorf("READ granted: %v", err)
	}
	if err := read("desc-secret"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("DESCRIBE only, Fetch: %v", err)
	}
	if _, err := e.fetch(0, 1); status.Code(err) != codes.PermissionDenied {
		t.Errorf("anonymous Fetch: %v", err)
	}
	if err := offsets("desc-secret"); err != nil {
		t.Errorf("DESCRIBE, ListOffsets: %v", err)
	}
	if err := offsets("ops-secret"); err != nil { // DELETE implies DESCRIBE
		t.Errorf("DELETE, ListOffsets: %v", err)
	}
	if _, err := dialToken(t, e.addr, "app-secret").DeleteTopic(ctx, &tierdpb.DeleteTopicRequest{Topic: "t"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("READ only, DeleteTopic: %v", err)
	}
	if _, err := dialToken(t, e.addr, "ops-secret").RestorePartition(ctx, &tierdpb.RestorePartitionRequest{Topic: "t"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("DELETE only, RestorePartition (needs ALTER): %v", err)
	}
	if _, err := dialToken(t, e.addr, "ops-secret").DeleteTopic(ctx, &tierdpb.DeleteTopicRequest{Topic: "t"}); err != nil {
		t.Errorf("DELETE granted, DeleteTopic: %v", err)
	}
	if c := op.calls(); len(c) != 1 || c[0] != "delete t by User:ops (host 127.0.0.1)" {
		t.Fatalf("operator calls %v", c)
	}
	// The listing shows t-0, never secret-0, to those who may describe t.
	for token, want := range map[string]int{"app-secret": 1, "desc-secret": 1} {
		resp, err := dialToken(t, e.addr, token).ListPartitions(ctx, &tierdpb.ListPartitionsRequest{})
		if err != nil || len(resp.GetPartitions()) != want {
			t.Errorf("%s ListPartitions: %v %v, want %d", token, resp, err, want)
		}
	}
	none := newEnv(t, DefaultConfig(), WithAdmin(op, dl, Identity{}), WithAuth(Auth{Tokens: tokens(t, TokenLine("User:x", "x-secret")), Authorizer: acls}))
	if resp, err := dialToken(t, none.addr, "x-secret").ListPartitions(ctx, &tierdpb.ListPartitionsRequest{}); err != nil || len(resp.GetPartitions()) != 0 {
		t.Errorf("a principal with no ACL lists %v %v", resp, err)
	}
}

// Under mutual TLS the caller is "User:" and its certificate's subject
// mapped by ssl.principal.mapping.rules, and Admin is served on TCP.
func TestAuthMTLSPrincipal(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	srv, client := ca.Server(t, "server"), ca.Client(t, "ops")
	h, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := kafkaacl.ParsePrincipalRules("RULE:^CN=(.*)$/$1/")
	if err != nil {
		t.Fatal(err)
	}
	op := &recordingOperator{}
	e := newEnv(t, DefaultConfig(), WithAdmin(op, e0(t), Identity{}), WithTLS(h.ServerConfig(true)),
		WithAuth(Auth{Mapping: rules, AdminPrincipals: []string{"User:ops"}}))
	a := dialToken(t, e.addr, "", WithClientTLS(testcerts.ClientConfig(t, ca, client)))
	if _, err := a.DeleteTopic(context.Background(), &tierdpb.DeleteTopicRequest{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	if c := op.calls(); len(c) != 1 || c[0] != "delete orders by User:ops (host 127.0.0.1)" {
		t.Fatalf("operator calls %v", c)
	}
	strict, _ := kafkaacl.ParsePrincipalRules("RULE:^CN=(.*),O=Acme$/$1/")
	e2 := newEnv(t, DefaultConfig(), WithAdmin(op, e0(t), Identity{}), WithTLS(h.ServerConfig(true)), WithAuth(Auth{Mapping: strict}))
	a2 := dialToken(t, e2.addr, "", WithClientTLS(testcerts.ClientConfig(t, ca, client)))
	if _, err := a2.Identity(context.Background(), &tierdpb.IdentityRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a certificate no rule maps: %v", err)
	}
}

// The admin socket is a socket of mode 0600 in a directory of mode 0700;
// a directory others may enter, or another file at the path, is refused
// and left alone; a socket left by a stopped tierd is replaced.
func TestListenLocal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "admin")
	path := filepath.Join(dir, "tierd.sock")
	lis, err := ListenLocal(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	dst, _ := os.Stat(dir)
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 {
		t.Fatalf("socket %v, dir %v", st.Mode(), dst.Mode())
	}
	// A socket left behind (a tierd killed) is replaced.
	lis.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	lis.Close()
	if lis, err = ListenLocal(path); err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	lis.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the socket stays after Close: %v", err)
	}
	if err := os.WriteFile(path, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenLocal(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "mine" {
		t.Fatal("the file was touched")
	}
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o755)
	if _, err := ListenLocal(filepath.Join(open, "tierd.sock")); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("in a directory others may enter: %v", err)
	}
	if os.Getuid() == 0 { // a directory another user owns: they could swap the socket
		theirs := filepath.Join(t.TempDir(), "theirs")
		os.Mkdir(theirs, 0o700)
		os.Chown(theirs, 65534, 65534)
		if _, err := ListenLocal(filepath.Join(theirs, "tierd.sock")); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Fatalf("in a directory another user owns: %v", err)
		}
	}
	if _, err := ListenLocal("/" + strings.Repeat("x", MaxSocketPath)); err == nil || !strings.Contains(err.Error(), "fetch.admin.socket") {
		t.Fatalf("a path too long: %v", err)
	}
}

// The tokens file: digests only, errors naming the line, never a digest.
func TestTokenSet(t *testing.T) {
	var ts TokenSet
	good := "# ops\n" + TokenLine("User:ops", "a") + "\n\n" + TokenLine("User:ops", "b") + "\n"
	if err := ts.Set(strings.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"a": "User:ops", "b": "User:ops", "c": "", "": ""} {
		if got, _ := ts.Principal(tok); got != want {
			t.Errorf("%q: %q, want %q", tok, got, want)
		}
	}
	for _, bad := range []string{"User:ops", "ops sha256:" + strings.Repeat("0", 64), "User:ops sha1:00", "User:ops sha256:zz",
		TokenLine("User:a", "x") + "\n" + TokenLine("User:b", "x")} {
		if err := ts.Set(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), strings.Repeat("0", 16)) {
			t.Errorf("error shows a digest: %v", err)
		}
	}
	if ts.Len() != 2 {
		t.Fatalf("a bad file changed the set: %d tokens", ts.Len())
	}
}

// A principal that could pass for the journal's own words (a certificate
// subject with parentheses or a newline) is quoted.
func TestCallerString(t *testing.T) {
	for c, want := range map[Caller]string{
		{Principal: "User:ops", Host: "10.0.0.1", UID: -1}:                           "User:ops (host 10.0.0.1)",
		{Principal: "User:x (admin socket, uid 0)", Host: "10.0.0.1", UID: -1}:       `"User:x (admin socket, uid 0)" (host 10.0.0.1)`,
		{Principal: "User:a\nscheduled orders-0 by root", Host: "10.0.0.1", UID: -1}: `"User:a\nscheduled orders-0 by root" (host 10.0.0.1)`,
		{Principal: "User:tierd", Local: true, UID: 7}:                               "User:tierd (admin socket, uid 7)",
	} {
		if got := c.String(); got != want {
			t.Errorf("%+v: %q, want %q", c, got, want)
		}
	}
}
