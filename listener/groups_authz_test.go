package listener

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener/groups/groupstest"
)

func groupACL(group string, op kafkaacl.Operation, perm kafkaacl.Permission) kafkaacl.ACL {
	return kafkaacl.ACL{ResourceType: kafkaacl.ResourceGroup, ResourceName: group, PatternType: kafkaacl.PatternLiteral,
		Principal: Anonymous, Host: "*", Operation: op, Permission: perm}
}

// TestGroupAuthorization: every group API checks Kafka's GROUP ACLs (READ
// to join, sync, heartbeat, leave and commit; DESCRIBE to find the
// coordinator, fetch offsets, list and describe; DELETE to delete groups
// and offsets) and the TOPIC ACLs of the partitions named; a denied
// request changes nothing, and a denial is logged with its principal.
func TestGroupAuthorization(t *testing.T) {
	set, err := kafkaacl.NewSet([]kafkaacl.ACL{
		groupACL("app", kafkaacl.OpRead, kafkaacl.Allow),
		groupACL("watched", kafkaacl.OpDescribe, kafkaacl.Allow),
		anonACL("orders", kafkaacl.PatternLiteral, kafkaacl.OpRead, kafkaacl.Allow),
	})
	if err != nil {
		t.Fatal(err)
	}
	store := groupstest.NewMemStore()
	ts, coord := groupServer(t, 1, 3, store, WithAuthorizer(staticAuthz{set}))
	if err := coord.Load(); err != nil { // Run loads too: whichever comes first
		t.Fatal(err)
	}
	// Groups that exist: "secret" and "watched" hold offsets committed
	// by someone else (straight at the coordinator).
	for _, g := range []string{"secret", "watched"} {
		q := kmsg.NewPtrOffsetCommitRequest()
		q.Version, q.Group, q.Generation = 8, g, -1
		q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 2}}}}
		if resp := coord.Commit(q, func(string, int32) int16 { return 0 }); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatal(resp)
		}
	}
	rc := dialRaw(t, ts.addr, "authz")
	gaf := kerr.GroupAuthorizationFailed.Code

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"app", "watched", "secret"}
	want := map[string]int16{"app": 0, "watched": 0, "secret": gaf} // READ implies DESCRIBE
	for _, co := range rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse).Coordinators {
		if co.ErrorCode != want[co.Key] || (co.ErrorCode != 0) != (co.NodeID == -1) {
			t.Errorf("FindCoordinator %s: %v node %d", co.Key, kerr.ErrorForCode(co.ErrorCode), co.NodeID)
		}
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = 5, "watched", 10000, 10000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0}}}
	if code := rc.roundTrip(join).(*kmsg.JoinGroupResponse).ErrorCode; code != gaf {
		t.Errorf("JoinGroup with DESCRIBE only: %v", kerr.ErrorForCode(code))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, "secret", "m", 1
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "secret", "m", 1
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.Members = 5, "secret", []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	if code := rc.roundTrip(sync).(*kmsg.SyncGroupResponse).ErrorCode; code != gaf {
		t.Errorf("SyncGroup: %v", kerr.ErrorForCode(code))
	}
	if code := rc.roundTrip(hb).(*kmsg.HeartbeatResponse).ErrorCode; code != gaf {
		t.Errorf("Heartbeat: %v", kerr.ErrorForCode(code))
	}
	if code := rc.roundTrip(leave).(*kmsg.LeaveGroupResponse).ErrorCode; code != gaf {
		t.Errorf("LeaveGroup: %v", kerr.ErrorForCode(code))
	}

	// OffsetCommit: READ on the group, then READ on each topic.
	commit := func(group string, topics ...string) map[string]int16 {
		q := kmsg.NewPtrOffsetCommitRequest()
		q.Version, q.Group, q.Generation = 8, group, -1
		for _, tp := range topics {
			q.Topics = append(q.Topics, kmsg.OffsetCommitRequestTopic{Topic: tp, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 9}}})
		}
		out := map[string]int16{}
		for _, rt := range rc.roundTrip(q).(*kmsg.OffsetCommitResponse).Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	if got := commit("secret", "orders"); got["orders"] != gaf {
		t.Errorf("OffsetCommit to a group without READ: %v", got)
	}
	if got := commit("app", "orders", "secret"); got["orders"] != 0 || got["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("OffsetCommit to app: %v", got)
	}
	if offs, _ := coord.Offsets("secret"); offs[tpOrders0].Offset != 2 {
		t.Errorf("a denied commit changed secret's offset: %+v", offs)
	}

	// OffsetFetch: DESCRIBE on the group; asking for every topic leaves
	// out those the caller may not describe.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "watched"}, {Group: "secret"}}
	for _, g := range rc.roundTrip(of).(*kmsg.OffsetFetchResponse).Groups {
		switch g.Group {
		case "watched":
			if g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Partitions[0].Offset != 2 {
				t.Errorf("OffsetFetch watched: %+v", g)
			}
		case "secret":
			if g.ErrorCode != gaf || len(g.Topics) != 0 {
				t.Errorf("OffsetFetch secret: %+v", g)
			}
		}
	}

	// ListGroups shows only what the caller may describe; DescribeGroups
	// refuses the rest.
	var listed []string
	for _, g := range rc.roundTrip(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse).Groups {
		listed = append(listed, g.Group)
	}
	if got := strings.Join(slices.Sorted(slices.Values(listed)), ","); got != "app,watched" {
		t.Errorf("ListGroups: %s, want app,watched", got)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 5, []string{"watched", "secret"}, true
	for _, g := range rc.roundTrip(dg).(*kmsg.DescribeGroupsResponse).Groups {
		switch {
		case g.Group == "watched" && (g.ErrorCode != 0 || g.AuthorizedOperations != 1<<8):
			t.Errorf("DescribeGroups watched: %v ops %b, want DESCRIBE only", kerr.ErrorForCode(g.ErrorCode), g.AuthorizedOperations)
		case g.Group == "secret" && g.ErrorCode != gaf:
			t.Errorf("DescribeGroups secret: %v", kerr.ErrorForCode(g.ErrorCode))
		}
	}

	// Deletes need DELETE, which nobody has here.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"watched", "secret"}
	for _, g := range rc.roundTrip(del).(*kmsg.DeleteGroupsResponse).Groups {
		if g.ErrorCode != gaf {
			t.Errorf("DeleteGroups %s: %v", g.Group, kerr.ErrorForCode(g.ErrorCode))
		}
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "watched"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if code := rc.roundTrip(od).(*kmsg.OffsetDeleteResponse).ErrorCode; code != gaf {
		t.Errorf("OffsetDelete: %v", kerr.ErrorForCode(code))
	}
	for _, g := range []string{"secret", "watched"} {
		if offs, _ := coord.Offsets(g); offs[tpOrders0].Offset != 2 {
			t.Errorf("denied deletes changed %s: %+v", g, offs)
		}
	}
	if !strings.Contains(ts.logs.String(), "Kafka request denied") || !strings.Contains(ts.logs.String(), "group=secret") || !strings.Contains(ts.logs.String(), "principal=User:ANONYMOUS") {
		t.Errorf("no group denial logged with its principal:\n%s", ts.logs.String())
	}

	// A real group consumer of a group it may not read stops with
	// GROUP_AUTHORIZATION_FAILED rather than retrying for ever.
	cl := groupConsumer(t, ts.addr, "secret")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the consumer never saw GROUP_AUTHORIZATION_FAILED")
		}
		var denied bool
		fs.EachError(func(_ string, _ int32, err error) { denied = denied || errors.Is(err, kerr.GroupAuthorizationFailed) })
		if denied {
			break
		}
		if fs.NumRecords() > 0 {
			t.Fatal("a consumer of a group it may not read got records")
		}
	}
}

var tpOrders0 = remotelog.TopicPartition{Topic: "orders", Partition: 0}

// TestGroupBytesOutliveTheRequest: the protocol metadata and assignment a
// group keeps are its own copies, not the bytes of the connection's
// buffer that the next request overwrites.
func TestGroupBytesOutliveTheRequest(t *testing.T) {
	ts, coord := groupServer(t, 1, 1, groupstest.NewMemStore())
	if err := coord.Load(); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, ts.addr, "bytes")
	overwrite := func() { // a request larger than the group requests, which the connection's buffer then holds
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 9
		for j := 0; j < 20; j++ {
			md.Topics = append(md.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(strings.Repeat("z", 40))})
		}
		rc.roundTrip(md)
	}
	overwrite() // the buffer grows to its size: the group requests are read into it
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = 3, "b", 10000, 10000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("METADATA-OF-THE-MEMBER")}}
	jr := rc.roundTrip(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %+v", jr)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 3, "b", jr.MemberID, jr.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("ASSIGNMENT-OF-THE-MEMBER")}}
	if sr := rc.roundTrip(sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("sync: %+v", sr)
	}
	overwrite()
	d := coord.Describe("b")
	if len(d.Members) != 1 || string(d.Members[0].ProtocolMetadata) != "METADATA-OF-THE-MEMBER" || string(d.Members[0].MemberAssignment) != "ASSIGNMENT-OF-THE-MEMBER" {
		t.Fatalf("the group's member after later requests: %q %q", d.Members[0].ProtocolMetadata, d.Members[0].MemberAssignment)
	}
}
