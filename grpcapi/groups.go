package grpcapi

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
)

// GroupSource is what the Admin service's ConsumerGroups reads: the group
// coordinator of tierd's Kafka listeners (listener/groups.Coordinator).
type GroupSource interface {
	// Status returns the group named, or every group for "".
	Status(ctx context.Context, group string) []remotelog.ConsumerGroupStatus
}

// WithGroups serves ConsumerGroups from src (with WithAdmin; default
// none: UNIMPLEMENTED).
func WithGroups(src GroupSource) Option { return func(s *Server) { s.groups = src } }

func (a *adminServer) ConsumerGroups(ctx context.Context, r *tierdpb.ConsumerGroupsRequest) (*tierdpb.ConsumerGroupsResponse, error) {
	if a.groups == nil {
		return nil, status.Error(codes.Unimplemented, "this tierd coordinates no consumer groups (no Kafka listener, or kafka.group.coordinator.enable false)")
	}
	resp := &tierdpb.ConsumerGroupsResponse{}
	for _, g := range a.groups.Status(ctx, r.GetGroup()) {
		pg := &tierdpb.ConsumerGroup{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Generation: g.Generation}
		for _, m := range g.Members {
			pm := &tierdpb.ConsumerGroupMember{MemberId: m.MemberID, InstanceId: m.InstanceID, ClientId: m.ClientID, ClientHost: m.ClientHost}
			for _, tp := range m.Assigned {
				pm.Assigned = append(pm.Assigned, &tierdpb.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
			}
			pg.Members = append(pg.Members, pm)
		}
		for _, o := range g.Offsets {
			pg.Offsets = append(pg.Offsets, &tierdpb.ConsumerGroupOffset{Topic: o.Topic, Partition: o.Partition, Committed: o.Committed,
				HighWatermark: o.HighWatermark, Lag: o.Lag})
		}
		resp.Groups = append(resp.Groups, pg)
	}
	return resp, nil
}

// ConsumerGroups answers the groups the caller may DESCRIBE (Kafka's
// GROUP resource), each with the offsets and assigned partitions of the
// topics it may DESCRIBE; naming a group it may not is PERMISSION_DENIED.
func (e *adminEdge) ConsumerGroups(ctx context.Context, r *tierdpb.ConsumerGroupsRequest) (*tierdpb.ConsumerGroupsResponse, error) {
	c, err := e.caller(ctx)
	if err != nil {
		return nil, err
	}
	if r.GetGroup() != "" && !e.mayGroup(c, r.GetGroup()) {
		return nil, status.Errorf(codes.PermissionDenied, "%s may not DESCRIBE group %q", c.Principal, r.GetGroup())
	}
	resp, err := e.a.ConsumerGroups(ctx, r)
	if err != nil || e.admin(c) {
		return resp, err
	}
	var kept []*tierdpb.ConsumerGroup
	for _, g := range resp.Groups {
		if !e.mayGroup(c, g.Group) {
			continue
		}
		var offs []*tierdpb.ConsumerGroupOffset
		for _, o := range g.Offsets {
			if e.may(c, kafkaacl.OpDescribe, o.Topic) {
				offs = append(offs, o)
			}
		}
		g.Offsets = offs
		for _, m := range g.Members {
			var tps []*tierdpb.TopicPartition
			for _, tp := range m.Assigned {
				if e.may(c, kafkaacl.OpDescribe, tp.Topic) {
					tps = append(tps, tp)
				}
			}
			m.Assigned = tps
		}
		kept = append(kept, g)
	}
	resp.Groups = kept
	return resp, nil
}

// mayGroup reports whether c may DESCRIBE group: an admin principal may;
// otherwise the Authorizer decides, and without one nobody else may.
func (e *adminEdge) mayGroup(c Caller, group string) bool {
	if e.admin(c) {
		return true
	}
	return e.s.auth.Authorizer != nil && e.s.allowedOn(c, kafkaacl.ResourceGroup, kafkaacl.OpDescribe, group)
}
