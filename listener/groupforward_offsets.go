package listener

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/remotelog"
)

// forwardCommit relays the partitions of an OffsetCommit that pass the
// client's checks (READ on the group and the topic, a partition tierd
// serves) and answers the others with their own codes.
func (s *Server) forwardCommit(ctx context.Context, c *conn, req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	check := func(string, int32) int16 { return codeGroupAuthz }
	if c.groupAllowed(kafkaacl.OpRead, req.Group) {
		var err error
		if check, err = s.partitionChecker(ctx, c, kafkaacl.OpRead); err != nil {
			return nil, err
		}
	}
	codes := map[remotelog.TopicPartition]int16{}
	fwd := *req
	fwd.Topics = nil
	for _, t := range req.Topics {
		ft := t
		ft.Partitions = nil
		for _, p := range t.Partitions {
			if code := check(t.Topic, p.Partition); code != 0 {
				codes[remotelog.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = code
				continue
			}
			ft.Partitions = append(ft.Partitions, p)
		}
		if len(ft.Partitions) > 0 {
			fwd.Topics = append(fwd.Topics, ft)
		}
	}
	if len(fwd.Topics) > 0 {
		r, err := s.relay(ctx, &fwd)
		if err != nil {
			return nil, err
		}
		for _, t := range r.(*kmsg.OffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				codes[remotelog.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			code, ok := codes[remotelog.TopicPartition{Topic: t.Topic, Partition: p.Partition}]
			if !ok {
				code = kerr.UnknownServerError.Code // the cluster did not answer for it
			}
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// forwardOffsetFetch relays an OffsetFetch in its batched form (v8) for
// the groups the client may describe, and gives the answer in the form of
// the client's version: topics it may not describe are
// TOPIC_AUTHORIZATION_FAILED when named, left out when every topic is
// asked for.
func (s *Server) forwardOffsetFetch(ctx context.Context, c *conn, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	asked := req.Groups
	if req.Version < 8 {
		g := kmsg.OffsetFetchRequestGroup{Group: req.Group}
		if req.Topics != nil {
			g.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
			for _, t := range req.Topics {
				g.Topics = append(g.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		asked = []kmsg.OffsetFetchRequestGroup{g}
	}
	fwd := kmsg.NewPtrOffsetFetchRequest()
	fwd.RequireStable = req.RequireStable
	for _, g := range asked {
		if c.groupAllowed(kafkaacl.OpDescribe, g.Group) {
			fwd.Groups = append(fwd.Groups, g)
		}
	}
	answers := map[string]kmsg.OffsetFetchResponseGroup{}
	if len(fwd.Groups) > 0 {
		r, err := s.relay(ctx, fwd)
		if err != nil {
			return nil, err
		}
		for _, g := range r.(*kmsg.OffsetFetchResponse).Groups {
			answers[g.Group] = g
		}
	}
	var out []kmsg.OffsetFetchResponseGroup
	for _, g := range asked {
		a, ok := answers[g.Group]
		switch {
		case !c.groupAllowed(kafkaacl.OpDescribe, g.Group):
			a = kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: codeGroupAuthz}
		case !ok:
			a = kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: kerr.CoordinatorNotAvailable.Code}
		}
		var topics []kmsg.OffsetFetchResponseGroupTopic
		for _, t := range a.Topics {
			if code := c.topicCode(kafkaacl.OpDescribe, t.Topic); code != 0 {
				if g.Topics == nil { // every topic asked: leave it out
					continue
				}
				for i := range t.Partitions {
					t.Partitions[i] = kmsg.OffsetFetchResponseGroupTopicPartition{Partition: t.Partitions[i].Partition, Offset: -1, LeaderEpoch: -1, ErrorCode: code}
				}
			}
			topics = append(topics, t)
		}
		a.Topics = topics
		out = append(out, a)
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		resp.Groups = out
		return resp, nil
	}
	g := out[0]
	if req.Version >= 2 {
		resp.ErrorCode = g.ErrorCode
	}
	for _, t := range g.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.OffsetFetchResponseTopicPartition{Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode}
			if req.Version < 2 && rp.ErrorCode == 0 {
				rp.ErrorCode = g.ErrorCode // v0-v1 have no group error
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// forwardListGroups relays a ListGroups and keeps the groups the client
// may describe (all of them with DESCRIBE on the cluster).
func (s *Server) forwardListGroups(ctx context.Context, c *conn, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	r, err := s.relay(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.ListGroupsResponse)
	if c.clusterAllowed(kafkaacl.OpDescribe) {
		return resp, nil
	}
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if c.groupAllowed(kafkaacl.OpDescribe, g.Group) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return resp, nil
}

// forwardByGroup relays a DescribeGroups or DeleteGroups for the groups
// the client may op and answers GROUP_AUTHORIZATION_FAILED for the
// others, in the request's order; a description's authorized operations
// are the client's, not tierd's.
func (s *Server) forwardByGroup(ctx context.Context, c *conn, kreq kmsg.Request, op kafkaacl.Operation) (kmsg.Response, error) {
	var names []string
	switch req := kreq.(type) {
	case *kmsg.DescribeGroupsRequest:
		names = req.Groups
	case *kmsg.DeleteGroupsRequest:
		names = req.Groups
	}
	var allowed []string
	for _, n := range names {
		if c.groupAllowed(op, n) {
			allowed = append(allowed, n)
		}
	}
	switch req := kreq.(type) {
	case *kmsg.DescribeGroupsRequest:
		got := map[string]kmsg.DescribeGroupsResponseGroup{}
		if len(allowed) > 0 {
			fwd := *req
			fwd.Groups = allowed
			r, err := s.relay(ctx, &fwd)
			if err != nil {
				return nil, err
			}
			for _, g := range r.(*kmsg.DescribeGroupsResponse).Groups {
				got[g.Group] = g
			}
		}
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, n := range names {
			g, ok := got[n]
			switch {
			case !c.groupAllowed(op, n):
				g = kmsg.DescribeGroupsResponseGroup{Group: n, ErrorCode: codeGroupAuthz}
			case !ok:
				g = kmsg.DescribeGroupsResponseGroup{Group: n, ErrorCode: kerr.CoordinatorNotAvailable.Code}
			case req.IncludeAuthorizedOperations:
				g.AuthorizedOperations = c.groupOps(n)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	case *kmsg.DeleteGroupsRequest:
		got := map[string]int16{}
		if len(allowed) > 0 {
			fwd := *req
			fwd.Groups = allowed
			r, err := s.relay(ctx, &fwd)
			if err != nil {
				return nil, err
			}
			for _, g := range r.(*kmsg.DeleteGroupsResponse).Groups {
				got[g.Group] = g.ErrorCode
			}
		}
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, n := range names {
			code, ok := got[n]
			switch {
			case !c.groupAllowed(op, n):
				code = codeGroupAuthz
			case !ok:
				code = kerr.CoordinatorNotAvailable.Code
			}
			resp.Groups = append(resp.Groups, kmsg.DeleteGroupsResponseGroup{Group: n, ErrorCode: code})
		}
		return resp, nil
	}
	return nil, nil
}
