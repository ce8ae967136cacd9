package grpcapi

import (
	"context"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
)

// journalLog has a journal naming two topics and one entry of none.
type journalLog struct{ listedLog }

func (journalLog) Journal(int64, int) ([]remotelog.JournalEntry, error) {
	return []remotelog.JournalEntry{
		{Seq: 1, Event: "scheduled", TopicPartition: remotelog.TopicPartition{Topic: "t"}},
		{Seq: 2, Event: "scheduled", TopicPartition: remotelog.TopicPartition{Topic: "secret"}},
		{Seq: 3, Event: "note"},
	}, nil
}

func (journalLog) Deletions(*remotelog.TopicPartition) ([]remotelog.PartitionDeletion, error) {
	return []remotelog.PartitionDeletion{{TopicPartition: remotelog.TopicPartition{Topic: "t"}}, {TopicPartition: remotelog.TopicPartition{Topic: "secret"}}}, nil
}

// An attacker on fetch.listen tries the routes around the Admin service's
// checks: raw metadata (several authorization headers, odd casing and
// spacing, a token-looking value without "Bearer "), reflection (which
// must not list the Admin service where it is not served), a stream
// method under ACLs, and the listings of topics it may not describe.
func TestAuthBypassAttempts(t *testing.T) {
	op := &recordingOperator{}
	ts := tokens(t, TokenLine("User:ops", "ops-secret"), TokenLine("User:app", "app-secret"))
	acls := newACLs(t, `
Current ACLs for resource `+"`"+`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`+"`"+`:
 	(principal=User:app, host=*, operation=READ, permissionType=ALLOW)
`)
	dl := journalLog{listedLog{DeletionLog: e0(t), tps: []remotelog.TopicPartition{{Topic: "t"}, {Topic: "secret"}}}}
	e := newEnv(t, DefaultConfig(), WithAdmin(op, dl, Identity{}), WithAuth(Auth{Tokens: ts, Authorizer: acls, AdminPrincipals: []string{"User:ops"}}))
	readtest.ReferenceLog(t, e.Rig)
	ctx := context.Background()
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := tierdpb.NewAdminClient(cc)
	del := &tierdpb.DeleteTopicRequest{Topic: "secret"}
	for name, md := range map[string]metadata.MD{
		"two headers, the valid one first": metadata.Pairs("authorization", "Bearer ops-secret", "authorization", "Bearer guess"),
		"two headers, the valid one last":  metadata.Pairs("authorization", "Bearer guess", "authorization", "Bearer ops-secret"),
		"lower-case scheme":                metadata.Pairs("authorization", "bearer ops-secret"),
		"no scheme":                        metadata.Pairs("authorization", "ops-secret"),
		"Basic":                            metadata.Pairs("authorization", "Basic b3BzOm9wcy1zZWNyZXQ="),
		"empty token":                      metadata.Pairs("authorization", "Bearer "),
		"blank token":                      metadata.Pairs("authorization", "Bearer    "),
		"a prefix of the token":            metadata.Pairs("authorization", "Bearer ops-"),
		"the token and more":               metadata.Pairs("authorization", "Bearer ops-secret x"),
		"another header":                   metadata.Pairs("x-authorization", "Bearer ops-secret"),
		"a -bin header":                    metadata.Pairs("authorization-bin", "Bearer ops-secret"),
		"a read token":                     metadata.Pairs("authorization", "Bearer app-secret"),
	} {
		_, err := admin.DeleteTopic(metadata.NewOutgoingContext(ctx, md), del)
		if err == nil {
			t.Errorf("%s: DeleteTopic accepted", name)
		}
		if m := status.Convert(err).Message(); strings.Contains(m, "ops-") || strings.Contains(m, "app-secret") {
			t.Errorf("%s: the answer shows the token: %v", name, err)
		}
	}
	if c := op.calls(); len(c) != 0 {
		t.Fatalf("a refused caller reached the operator: %v", c)
	}
	// A stream read and ListSegments need the same rights as Fetch and ListOffsets.
	api := tierdpb.NewRemoteFetchClient(cc)
	st, err := api.FetchStream(ctx, &tierdpb.FetchRequest{Topic: "t", MaxBytes: 1})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("anonymous FetchStream under ACLs: %v", err)
	}
	if _, err := api.ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: "t"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("anonymous ListSegments under ACLs: %v", err)
	}
	// app may read t: it sees t's journal entries and deletions, never
	// secret's nor the entry of no topic.
	app := metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer app-secret"))
	j, err := admin.Journal(app, &tierdpb.JournalRequest{})
	if err != nil || len(j.GetEntries()) != 1 || j.GetEntries()[0].GetTopic() != "t" {
		t.Errorf("app's journal: %v %v", j, err)
	}
	d, err := admin.ListDeletions(app, &tierdpb.ListDeletionsRequest{})
	if err != nil || len(d.GetDeletions()) != 1 || d.GetDeletions()[0].GetTopic() != "t" {
		t.Errorf("app's deletions: %v %v", d, err)
	}
	if _, err := admin.ListDeletions(app, &tierdpb.ListDeletionsRequest{Topic: "secret"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("app's deletions of secret: %v", err)
	}
	if _, err := admin.PartitionStatus(app, &tierdpb.PartitionStatusRequest{Topic: "secret"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("app's status of secret: %v", err)
	}
}

// Without tokens or mtls the Admin service is not on TCP, and reflection
// there does not list it.
func TestReflectionHidesAdmin(t *testing.T) {
	e := newEnv(t, DefaultConfig(), WithAdmin(&recordingOperator{}, e0(t), Identity{}))
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rs, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	resp, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	rs.CloseSend()
	for _, s := range resp.GetListServicesResponse().GetService() {
		if s.GetName() == tierdpb.Admin_ServiceDesc.ServiceName {
			t.Errorf("reflection on TCP lists %s", s.GetName())
		}
	}
	if _, err := rs.Recv(); err != io.EOF && err != nil && status.Code(err) != codes.Canceled {
		t.Logf("reflection stream end: %v", err)
	}
}
