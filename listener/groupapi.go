package listener

import (
	"context"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener/groups"
)

// WithGroups serves consumer groups (the classic group protocol) from
// coordinator: tierd is the coordinator of every group. Several
// listeners may share one coordinator; its Run is the caller's to run.
// Default none: the group APIs are not advertised, and consumers use
// assign-style consumption.
func WithGroups(coordinator *groups.Coordinator) Option {
	return func(s *Server) { s.groups = coordinator }
}

// groupServed are the group APIs and versions served WithGroups.
var groupServed = []apiRange{
	{int16(kmsg.FindCoordinator), 0, 4},
	{int16(kmsg.JoinGroup), 0, 9},
	{int16(kmsg.SyncGroup), 0, 5},
	{int16(kmsg.Heartbeat), 0, 4},
	{int16(kmsg.LeaveGroup), 0, 5},
	{int16(kmsg.OffsetCommit), 0, 8},
	{int16(kmsg.OffsetFetch), 0, 8},
	{int16(kmsg.ListGroups), 0, 5},
	{int16(kmsg.DescribeGroups), 0, 5},
	{int16(kmsg.DeleteGroups), 0, 2},
	{int16(kmsg.OffsetDelete), 0, 0},
}

// groupAllowed reports whether c may do op on group (Kafka's GROUP
// resource), logging a denial once per client and group.
func (c *conn) groupAllowed(op kafkaacl.Operation, group string) bool {
	return c.authorized(kafkaacl.ResourceGroup, op, group)
}

var codeGroupAuthz = kerr.GroupAuthorizationFailed.Code

// isGroupAPI reports whether key is a group API other than
// FindCoordinator.
func isGroupAPI(key int16) bool {
	_, ok := lookupRange(groupServed, key)
	return ok && key != int16(kmsg.FindCoordinator)
}

// client is who c is, as the coordinator records members: the client id
// and "/" and the client's address, as Kafka's DescribeGroups shows it.
func (c *conn) client() groups.Client {
	return groups.Client{ID: c.clientID, Host: "/" + c.ip}
}

// handleFindCoordinator answers FindCoordinator: for a group, this
// listener's broker (GROUP_AUTHORIZATION_FAILED without DESCRIBE on the
// group); tierd coordinates no transactions (COORDINATOR_NOT_AVAILABLE)
// and no other key type (INVALID_REQUEST).
func (s *Server) handleFindCoordinator(c *conn, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	one := func(key string) (code int16) {
		switch {
		case req.CoordinatorType == 1:
			return kerr.CoordinatorNotAvailable.Code
		case req.CoordinatorType != 0:
			return kerr.InvalidRequest.Code
		case !c.groupAllowed(kafkaacl.OpDescribe, key):
			return codeGroupAuthz
		}
		return 0
	}
	if req.Version < 4 {
		resp.ErrorCode = one(req.CoordinatorKey)
		if resp.ErrorCode == 0 {
			resp.NodeID, resp.Host, resp.Port = s.nodeID, s.advHost, s.advPort
		} else {
			resp.NodeID, resp.Port = -1, -1
		}
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID, co.Port = key, -1, -1
		if co.ErrorCode = one(key); co.ErrorCode == 0 {
			co.NodeID, co.Host, co.Port = s.nodeID, s.advHost, s.advPort
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp
}

func (s *Server) handleJoinGroup(ctx context.Context, c *conn, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	if !c.groupAllowed(kafkaacl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.MemberID, resp.Generation = codeGroupAuthz, req.MemberID, -1
		return resp, nil
	}
	resp, err := s.groups.Join(ctx, c.client(), req)
	if resp != nil {
		resp.Version = req.Version
	}
	return resp, err
}

func (s *Server) handleSyncGroup(ctx context.Context, c *conn, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	if !c.groupAllowed(kafkaacl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = codeGroupAuthz
		return resp, nil
	}
	resp, err := s.groups.Sync(ctx, req)
	if resp != nil {
		resp.Version = req.Version
	}
	return resp, err
}

func (s *Server) handleHeartbeat(c *conn, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	if !c.groupAllowed(kafkaacl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = codeGroupAuthz
		return resp
	}
	resp := s.groups.Heartbeat(req)
	resp.Version = req.Version
	return resp
}

func (s *Server) handleLeaveGroup(c *conn, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	if !c.groupAllowed(kafkaacl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = codeGroupAuthz
		return resp
	}
	resp := s.groups.Leave(req)
	resp.Version = req.Version
	return resp
}

// partitionChecker returns the code of a partition before a group
// request looks at it: TOPIC_AUTHORIZATION_FAILED without op on the
// topic, UNKNOWN_TOPIC_OR_PARTITION for a partition the Log does not
// serve (as a broker answers for one its metadata does not have).
func (s *Server) partitionChecker(ctx context.Context, c *conn, op kafkaacl.Operation) (func(topic string, partition int32) int16, error) {
	topics, err := s.log.Topics(ctx)
	if err != nil {
		return nil, err
	}
	s.topics.set(topics)
	parts := map[string]map[int32]bool{}
	for _, t := range topics {
		m := map[int32]bool{}
		for _, p := range t.Partitions {
			m[p] = true
		}
		parts[t.Name] = m
	}
	return func(topic string, partition int32) int16 {
		if code := c.topicCode(op, topic); code != 0 {
			return code
		}
		if !parts[topic][partition] {
			return kerr.UnknownTopicOrPartition.Code
		}
		return 0
	}, nil
}

// handleOffsetCommit answers OffsetCommit: READ on the group (else every
// partition GROUP_AUTHORIZATION_FAILED) and on each topic.
func (s *Server) handleOffsetCommit(ctx context.Context, c *conn, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	var check func(string, int32) int16
	if !c.groupAllowed(kafkaacl.OpRead, req.Group) {
		check = func(string, int32) int16 { return codeGroupAuthz }
	} else {
		var err error
		if check, err = s.partitionChecker(ctx, c, kafkaacl.OpRead); err != nil {
			return nil, err
		}
	}
	resp := s.groups.Commit(req, check)
	resp.Version = req.Version
	return resp, nil
}

// handleOffsetFetch answers OffsetFetch for one group (v0-v7) or several
// (v8): DESCRIBE on the group, and on each topic (a topic named without
// it gets TOPIC_AUTHORIZATION_FAILED; asking for all topics leaves it
// out). A partition without a commit gets offset -1.
func (s *Server) handleOffsetFetch(c *conn, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			var asked []kmsg.OffsetFetchRequestTopic
			if rg.Topics != nil {
				asked = []kmsg.OffsetFetchRequestTopic{}
				for _, t := range rg.Topics {
					asked = append(asked, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			topics, code := s.fetchOffsets(c, rg.Group, asked, req.Version)
			g.ErrorCode = code
			for _, t := range topics {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.Topic
				for _, p := range t.Partitions {
					gt.Partitions = append(gt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p.Partition, Offset: p.Offset,
						LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode})
				}
				g.Topics = append(g.Topics, gt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
	topics, code := s.fetchOffsets(c, req.Group, req.Topics, req.Version)
	resp.Topics = topics
	if req.Version >= 2 {
		resp.ErrorCode = code
	} else if code != 0 { // v0-v1 have no group error: every partition carries it
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	}
	return resp
}

// fetchOffsets is one group's OffsetFetch answer; asked nil means every
// topic with a commit (v2+).
func (s *Server) fetchOffsets(c *conn, group string, asked []kmsg.OffsetFetchRequestTopic, version int16) ([]kmsg.OffsetFetchResponseTopic, int16) {
	var offsets map[remotelog.TopicPartition]groups.Committed
	code := int16(0)
	if !c.groupAllowed(kafkaacl.OpDescribe, group) {
		code = codeGroupAuthz
	} else {
		offsets, code = s.groups.Offsets(group)
	}
	if asked == nil && code == 0 {
		byTopic := map[string][]int32{}
		for tp := range offsets {
			if c.topicCode(kafkaacl.OpDescribe, tp.Topic) == 0 {
				byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
			}
		}
		for t, ps := range byTopic {
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			asked = append(asked, kmsg.OffsetFetchRequestTopic{Topic: t, Partitions: ps})
		}
		sort.Slice(asked, func(i, j int) bool { return asked[i].Topic < asked[j].Topic })
	}
	var out []kmsg.OffsetFetchResponseTopic
	for _, t := range asked {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		tcode := c.topicCode(kafkaacl.OpDescribe, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			empty := ""
			rp.Metadata = &empty
			switch {
			case tcode != 0:
				rp.ErrorCode = tcode
			case code != 0:
				if version < 2 {
					rp.ErrorCode = code
				}
			default:
				if o, ok := offsets[remotelog.TopicPartition{Topic: t.Topic, Partition: p}]; ok {
					md := o.Metadata
					rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Offset, o.LeaderEpoch, &md
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out, code
}

// handleListGroups lists the groups c may describe (all of them with
// DESCRIBE on the cluster), filtered by state (v4+) and type (v5+: every
// group is "classic").
func (s *Server) handleListGroups(c *conn, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	list, code := s.groups.List(req.StatesFilter)
	resp.ErrorCode = code
	if len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, "classic") {
		return resp
	}
	all := c.clusterAllowed(kafkaacl.OpDescribe)
	for _, g := range list {
		if !all && !c.groupAllowed(kafkaacl.OpDescribe, g.Group) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, g.ProtocolType, string(g.State), "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// handleDescribeGroups describes each group c may describe
// (GROUP_AUTHORIZATION_FAILED otherwise), with the operations c may do on
// it when asked (v3+, KIP-430).
func (s *Server) handleDescribeGroups(c *conn, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		var d kmsg.DescribeGroupsResponseGroup
		if !c.groupAllowed(kafkaacl.OpDescribe, name) {
			d = kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = name, codeGroupAuthz
		} else {
			d = s.groups.Describe(name)
			if req.IncludeAuthorizedOperations {
				d.AuthorizedOperations = c.groupOps(name)
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// groupOps is the bit set of the operations c may do on group (KIP-430):
// of what a group has, READ, DESCRIBE and DELETE.
func (c *conn) groupOps(group string) int32 {
	var ops int32
	for _, op := range []kafkaacl.Operation{kafkaacl.OpRead, kafkaacl.OpDescribe, kafkaacl.OpDelete} {
		if c.groupAllowed(op, group) {
			ops |= 1 << int32(op)
		}
	}
	return ops
}

// handleDeleteGroups deletes each Empty group c may delete (DELETE on the
// group).
func (s *Server) handleDeleteGroups(c *conn, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = name
		if !c.groupAllowed(kafkaacl.OpDelete, name) {
			g.ErrorCode = codeGroupAuthz
		} else {
			g.ErrorCode = s.groups.Delete(name)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// handleOffsetDelete deletes a group's offsets of the partitions named
// (KIP-496): DELETE on the group, READ on each topic.
func (s *Server) handleOffsetDelete(ctx context.Context, c *conn, req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !c.groupAllowed(kafkaacl.OpDelete, req.Group) {
		resp.ErrorCode = codeGroupAuthz
		return resp, nil
	}
	check, err := s.partitionChecker(ctx, c, kafkaacl.OpRead)
	if err != nil {
		return nil, err
	}
	var asked []remotelog.TopicPartition
	pre := map[remotelog.TopicPartition]int16{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := remotelog.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if code := check(t.Topic, p.Partition); code != 0 {
				pre[tp] = code
				continue
			}
			asked = append(asked, tp)
		}
	}
	code, per := s.groups.DeleteOffsets(req.Group, asked)
	resp.ErrorCode = code
	if code != 0 {
		return resp, nil
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			tp := remotelog.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			if c, ok := pre[tp]; ok {
				rp.ErrorCode = c
			} else {
				rp.ErrorCode = per[tp]
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
