package grpcapi

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
)

// fakeGroups holds two groups, each with a member assigned and offsets
// committed in the topics t and secret.
type fakeGroups struct{}

func (fakeGroups) Status(_ context.Context, group string) []remotelog.ConsumerGroupStatus {
	var out []remotelog.ConsumerGroupStatus
	for _, name := range []string{"app-group", "secret-group"} {
		if group != "" && group != name {
			continue
		}
		out = append(out, remotelog.ConsumerGroupStatus{Group: name, State: "Stable", ProtocolType: "consumer", Protocol: "range", Generation: 4,
			Members: []remotelog.GroupMemberStatus{{MemberID: "m1", ClientID: "c", ClientHost: "/10.0.0.1",
				Assigned: []remotelog.TopicPartition{{Topic: "secret", Partition: 0}, {Topic: "t", Partition: 0}}}},
			Offsets: []remotelog.GroupOffsetStatus{
				{TopicPartition: remotelog.TopicPartition{Topic: "secret", Partition: 0}, Committed: 1, HighWatermark: 9, Lag: 8},
				{TopicPartition: remotelog.TopicPartition{Topic: "t", Partition: 0}, Committed: 5, HighWatermark: 9, Lag: 4},
			}})
	}
	return out
}

// TestConsumerGroupsAuth: ConsumerGroups needs an authenticated caller;
// one that is not an admin principal sees the groups it may DESCRIBE
// (GROUP ACLs) with only the offsets and assigned partitions of topics it
// may DESCRIBE, and naming another group is PERMISSION_DENIED; an admin
// principal sees everything; a server without groups is UNIMPLEMENTED.
func TestConsumerGroupsAuth(t *testing.T) {
	ts := tokens(t, TokenLine("User:ops", "ops-secret"), TokenLine("User:app", "app-secret"))
	acls := newACLs(t, `
Current ACLs for resource `+"`"+`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`+"`"+`:
 	(principal=User:app, host=*, operation=READ, permissionType=ALLOW)

Current ACLs for resource `+"`"+`ResourcePattern(resourceType=GROUP, name=app-group, patternType=LITERAL)`+"`"+`:
 	(principal=User:app, host=*, operation=READ, permissionType=ALLOW)
`)
	e := newEnv(t, DefaultConfig(), WithAdmin(&recordingOperator{}, e0(t), Identity{}), WithGroups(fakeGroups{}),
		WithAuth(Auth{Tokens: ts, Authorizer: acls, AdminPrincipals: []string{"User:ops"}}))
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := tierdpb.NewAdminClient(cc)
	ctx := context.Background()
	as := func(token string) context.Context {
		return metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer "+token))
	}
	if _, err := admin.ConsumerGroups(ctx, &tierdpb.ConsumerGroupsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("anonymous: %v", err)
	}
	resp, err := admin.ConsumerGroups(as("app-secret"), &tierdpb.ConsumerGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetGroups()) != 1 || resp.GetGroups()[0].GetGroup() != "app-group" {
		t.Fatalf("app sees %v, want app-group only", resp.GetGroups())
	}
	g := resp.GetGroups()[0]
	if len(g.GetOffsets()) != 1 || g.GetOffsets()[0].GetTopic() != "t" || g.GetOffsets()[0].GetLag() != 4 {
		t.Errorf("app-group's offsets as app sees them: %v", g.GetOffsets())
	}
	if a := g.GetMembers()[0].GetAssigned(); len(a) != 1 || a[0].GetTopic() != "t" {
		t.Errorf("the member's partitions as app sees them: %v", a)
	}
	if _, err := admin.ConsumerGroups(as("app-secret"), &tierdpb.ConsumerGroupsRequest{Group: "secret-group"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("app naming secret-group: %v", err)
	}
	all, err := admin.ConsumerGroups(as("ops-secret"), &tierdpb.ConsumerGroupsRequest{})
	if err != nil || len(all.GetGroups()) != 2 || len(all.GetGroups()[1].GetOffsets()) != 2 {
		t.Errorf("ops: %v %v", all, err)
	}

	bare := newEnv(t, DefaultConfig(), WithAdmin(&recordingOperator{}, e0(t), Identity{}), WithAuth(Auth{Tokens: ts, AdminPrincipals: []string{"User:ops"}}))
	cc2, err := grpc.NewClient(bare.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc2.Close()
	if _, err := tierdpb.NewAdminClient(cc2).ConsumerGroups(as("ops-secret"), &tierdpb.ConsumerGroupsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("a server without groups: %v", err)
	}
}
