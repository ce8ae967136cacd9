package listener

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// GroupForwarder sends a consumer group request to the Kafka cluster's
// group coordinator of its group and returns the answer (cluster.Client's
// ForwardGroup). It may send req at a higher version than req's own: the
// listener gives it requests whose meaning does not depend on it.
type GroupForwarder interface {
	ForwardGroup(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// WithGroupForwarding serves consumer groups by forwarding the group
// protocol to the Kafka cluster's coordinators: the groups and their
// offsets are the cluster's, shared by every tierd (and broker) of the
// cluster. FindCoordinator answers this listener (clients speak the group
// protocol to tierd, which relays it); the listener checks the client's
// GROUP and TOPIC ACLs first, as for its own groups, and the cluster
// checks tierd's own principal. It takes precedence over WithGroups.
func WithGroupForwarding(f GroupForwarder) Option { return func(s *Server) { s.fwd = f } }

// forwardGroup answers a group request (not FindCoordinator) by relaying
// it to the cluster, after the client's ACLs, in the version the client
// asked in (the relay may have sent another).
func (s *Server) forwardGroup(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	version := kreq.GetVersion()
	resp, err := s.forwardAs(ctx, c, kreq)
	kreq.SetVersion(version)
	if resp != nil {
		resp.SetVersion(version)
	}
	return resp, err
}

func (s *Server) forwardAs(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	switch req := kreq.(type) {
	case *kmsg.JoinGroupRequest:
		if !c.groupAllowed(kafkaacl.OpRead, req.Group) {
			return joinDenied(req), nil
		}
		return s.forwardJoin(ctx, req)
	case *kmsg.SyncGroupRequest:
		if !c.groupAllowed(kafkaacl.OpRead, req.Group) {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = codeGroupAuthz
			return resp, nil
		}
	case *kmsg.HeartbeatRequest:
		if !c.groupAllowed(kafkaacl.OpRead, req.Group) {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = codeGroupAuthz
			return resp, nil
		}
	case *kmsg.LeaveGroupRequest:
		if !c.groupAllowed(kafkaacl.OpRead, req.Group) {
			resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = codeGroupAuthz
			return resp, nil
		}
		return s.forwardLeave(ctx, req)
	case *kmsg.OffsetCommitRequest:
		return s.forwardCommit(ctx, c, req)
	case *kmsg.OffsetFetchRequest:
		return s.forwardOffsetFetch(ctx, c, req)
	case *kmsg.ListGroupsRequest:
		return s.forwardListGroups(ctx, c, req)
	case *kmsg.DescribeGroupsRequest:
		return s.forwardByGroup(ctx, c, req, kafkaacl.OpDescribe)
	case *kmsg.DeleteGroupsRequest:
		return s.forwardByGroup(ctx, c, req, kafkaacl.OpDelete)
	case *kmsg.OffsetDeleteRequest:
		if !c.groupAllowed(kafkaacl.OpDelete, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = codeGroupAuthz
			return resp, nil
		}
	default:
		return nil, fmt.Errorf("listener: %s is not a group request", kmsg.NameForKey(kreq.Key()))
	}
	return s.relay(ctx, kreq)
}

// relay forwards req; a cluster that cannot be reached answers
// COORDINATOR_NOT_AVAILABLE (the client looks for its coordinator again)
// rather than closing the client's connection.
func (s *Server) relay(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, err := s.fwd.ForwardGroup(ctx, req)
	if err == nil {
		return resp, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if s.once.first("group-forward", "", "") {
		s.logger.Warn("Kafka group request not forwarded to the cluster: answered COORDINATOR_NOT_AVAILABLE (logged once)",
			"api", kmsg.NameForKey(req.Key()), "err", err)
	}
	return coordinatorNotAvailable(req), nil
}

// coordinatorNotAvailable is req's answer with COORDINATOR_NOT_AVAILABLE
// wherever it has an error code.
func coordinatorNotAvailable(req kmsg.Request) kmsg.Response {
	code := kerr.CoordinatorNotAvailable.Code
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation = code, -1
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.ListGroupsResponse:
		r.ErrorCode = code
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	case *kmsg.OffsetFetchResponse:
		r.ErrorCode = code
		for _, g := range req.(*kmsg.OffsetFetchRequest).Groups {
			r.Groups = append(r.Groups, kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: code})
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range req.(*kmsg.OffsetCommitRequest).Topics {
			rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DescribeGroupsResponse:
		for _, g := range req.(*kmsg.DescribeGroupsRequest).Groups {
			r.Groups = append(r.Groups, kmsg.DescribeGroupsResponseGroup{Group: g, ErrorCode: code})
		}
	case *kmsg.DeleteGroupsResponse:
		for _, g := range req.(*kmsg.DeleteGroupsRequest).Groups {
			r.Groups = append(r.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: code})
		}
	}
	return resp
}

func joinDenied(req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.MemberID, resp.Generation = codeGroupAuthz, req.MemberID, -1
	return resp
}

// forwardJoin relays a JoinGroup. A client older than v4 knows nothing of
// KIP-394, so the MEMBER_ID_REQUIRED round a newer version may get is
// done here, with the member id the cluster gave.
func (s *Server) forwardJoin(ctx context.Context, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	version := req.Version
	if version == 0 {
		req.RebalanceTimeoutMillis = req.SessionTimeoutMillis // v0 has none: the session timeout
	}
	resp, err := s.relay(ctx, req)
	if err != nil {
		return nil, err
	}
	if jr := resp.(*kmsg.JoinGroupResponse); version < 4 && req.MemberID == "" && jr.ErrorCode == kerr.MemberIDRequired.Code {
		req.MemberID = jr.MemberID
		return s.relay(ctx, req)
	}
	return resp, nil
}

// forwardLeave relays a LeaveGroup; v0-v2 name one member at the top,
// which the batched form (v3+, KIP-345) carries as its only member.
func (s *Server) forwardLeave(ctx context.Context, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	version := req.Version
	if version < 3 {
		req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	resp, err := s.relay(ctx, req)
	if err != nil || version >= 3 {
		return resp, err
	}
	lr := resp.(*kmsg.LeaveGroupResponse)
	if lr.ErrorCode == 0 && len(lr.Members) > 0 {
		lr.ErrorCode = lr.Members[0].ErrorCode
	}
	return lr, nil
}
