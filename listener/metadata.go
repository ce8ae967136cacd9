package listener

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// Authorized-operation bits for Metadata v8+ (Kafka's AclOperation codes:
// READ 3, DESCRIBE 8): a read-only listener allows those two.
const (
	topicOpsReadDescribe = 1<<3 | 1<<8
	clusterOpsDescribe   = 1 << 8
)

// handleMetadata answers Metadata v0-v12.
//
// Behavior:
//   - One broker: the node id and advertised host:port; it is the
//     controller (v1+) and the cluster id is the one given (v2+, null when
//     none).
//   - All topics when the request's list is null (v1+) or empty (v0),
//     sorted by name; otherwise the topics asked for, in order, once each
//     (a name or id repeated is answered once, as Kafka does).
//     v12 may name topics by id: an unknown id gets UNKNOWN_TOPIC_ID;
//     names or ids where the version does not allow them get
//     INVALID_REQUEST. An invalid topic name gets INVALID_TOPIC_EXCEPTION,
//     a valid one tierd does not hold UNKNOWN_TOPIC_OR_PARTITION (as
//     Kafka with auto creation off: allow_auto_topic_creation is ignored).
//   - A held topic lists partitions 0..highest held, up to 99999 (a
//     higher number, as a stray directory may have, is not listed, so
//     that it cannot make every Metadata answer billions of entries long;
//     logged once). A held partition is
//     led by the node, with replicas and ISR [node], leader epoch the
//     Log's latest (v7+; -1 when its lineage is empty). A number tierd
//     does not hold is listed with LEADER_NOT_AVAILABLE, leader -1 and no
//     replicas, the shape of a partition whose leader is offline: franz-go,
//     librdkafka, sarama and kafka-python keep the other partitions usable
//     (sarama retries its metadata refresh a few times first).
//   - Internal topics (__consumer_offsets, __transaction_state) are
//     flagged (v1+). Authorized operations (v8+, when asked) are READ and
//     DESCRIBE, or with an Authorizer those of them the ACLs allow;
//     unauthorized topics are left out or refused (doc.go,
//     "Authorization").
//   - If the Log cannot list its topics, the connection is closed (no
//     Metadata version before v13 can carry the error); the client
//     reconnects and asks again.
func (s *Server) handleMetadata(ctx context.Context, c *conn, req *kmsg.MetadataRequest) (*kmsg.MetadataResponse, error) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: s.nodeID, Host: s.advHost, Port: s.advPort}}
	if s.clusterID != "" {
		resp.ClusterID = kmsg.StringPtr(s.clusterID)
	}
	resp.ControllerID = s.nodeID
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations && c.clusterAllowed(kafkaacl.OpDescribe) {
		resp.AuthorizedOperations = clusterOpsDescribe
	}
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if !all && len(req.Topics) == 0 {
		return resp, nil
	}
	topics, err := s.log.Topics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listener: list topics: %w", err)
	}
	s.topics.set(topics)
	topics = slices.DeleteFunc(topics, func(t Topic) bool { return t.Name == clusterMetadataTopic })
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	byName := make(map[string]*Topic, len(topics))
	byID := make(map[[16]byte]*Topic, len(topics))
	for i := range topics {
		byName[topics[i].Name] = &topics[i]
		byID[topics[i].ID] = &topics[i]
	}
	add := func(t kmsg.MetadataResponseTopic) {
		if req.Version >= 8 && req.IncludeTopicAuthorizedOperations && t.ErrorCode == 0 {
			t.AuthorizedOperations = topicOpsReadDescribe
			if s.authz != nil {
				t.AuthorizedOperations = c.topicOps(*t.Topic)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	if all {
		for i := range topics {
			if !c.allowed(kafkaacl.OpDescribe, topics[i].Name) {
				continue // left out, as Kafka leaves out what the client may not describe
			}
			t, err := s.topicMetadata(ctx, &topics[i])
			if err != nil {
				return nil, err
			}
			add(t)
		}
		return resp, nil
	}
	seen := map[string]bool{}
	seenID := map[[16]byte]bool{}
	for _, rt := range req.Topics {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		var held *Topic
		switch {
		case rt.TopicID != [16]byte{} && req.Version < 12, rt.Topic == nil && req.Version < 12:
			t.ErrorCode = kerr.InvalidRequest.Code
		case rt.Topic == nil:
			if seenID[rt.TopicID] {
				continue
			}
			seenID[rt.TopicID] = true
			if held = byID[rt.TopicID]; held == nil {
				t.ErrorCode = kerr.UnknownTopicID.Code
			} else if !c.allowed(kafkaacl.OpDescribe, held.Name) {
				held, t.ErrorCode = nil, kerr.TopicAuthorizationFailed.Code // the name stays unsaid
			}
		default:
			if seen[*rt.Topic] {
				continue
			}
			seen[*rt.Topic] = true
			t.IsInternal = isInternal(*rt.Topic)
			switch {
			case *rt.Topic != clusterMetadataTopic && !c.allowed(kafkaacl.OpDescribe, *rt.Topic):
				// Before its existence is looked at, as Kafka does: an
				// unauthorized client learns nothing of which topics exist.
				t.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !validTopicName(*rt.Topic):
				t.ErrorCode = kerr.InvalidTopicException.Code
			case byName[*rt.Topic] == nil:
				t.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				held = byName[*rt.Topic]
			}
		}
		if held != nil {
			var err error
			if t, err = s.topicMetadata(ctx, held); err != nil {
				return nil, err
			}
		}
		add(t)
	}
	return resp, nil
}

// maxListedPartition bounds the partition numbers Metadata lists: every
// number up to the highest held is listed, so one stray directory named
// "<topic>-2147483646" would otherwise make each Metadata request build
// two billion entries. No Kafka topic has this many partitions (clusters
// hold some hundred thousand in all).
const maxListedPartition = 100000

// topicMetadata describes one held topic: partitions 0..highest held
// (below maxListedPartition; a higher one is not served, logged once per
// topic).
func (s *Server) topicMetadata(ctx context.Context, tp *Topic) (kmsg.MetadataResponseTopic, error) {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.TopicID, t.IsInternal = kmsg.StringPtr(tp.Name), tp.ID, tp.Internal
	held := make(map[int32]bool, len(tp.Partitions))
	var highest int32 = -1
	for _, p := range tp.Partitions {
		switch {
		case p >= maxListedPartition:
			if s.once.first("partition_too_high", "", tp.Name) {
				s.logger.Warn("partition number too high to list in Metadata; not served (logged once per topic)",
					"topic", tp.Name, "partition", p, "max", maxListedPartition-1)
			}
		case p >= 0:
			held[p] = true
			highest = max(highest, p)
		}
	}
	for p := int32(0); p <= highest; p++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		epoch, ok, err := s.leaderEpoch(ctx, TopicPartition{tp.Name, p}, held[p])
		if err != nil {
			return t, err
		}
		if ok {
			mp.Leader, mp.LeaderEpoch = s.nodeID, epoch
			mp.Replicas, mp.ISR, mp.OfflineReplicas = []int32{s.nodeID}, []int32{s.nodeID}, []int32{}
		} else {
			mp.ErrorCode, mp.Leader = kerr.LeaderNotAvailable.Code, -1
			mp.Replicas, mp.ISR, mp.OfflineReplicas = []int32{}, []int32{}, []int32{}
		}
		t.Partitions = append(t.Partitions, mp)
	}
	return t, nil
}

// leaderEpoch returns a held partition's latest leader epoch; ok is false
// when the partition is not held (or vanished since Topics). A storage
// failure leaves the epoch unknown (-1) rather than failing the request.
func (s *Server) leaderEpoch(ctx context.Context, tp TopicPartition, held bool) (int32, bool, error) {
	if !held {
		return -1, false, nil
	}
	off, err := s.log.Offsets(ctx, tp)
	switch {
	case err == nil:
		return off.LeaderEpoch, true, nil
	case errors.Is(err, ErrUnknownPartition):
		return -1, false, nil
	case ctx.Err() != nil:
		return -1, false, ctx.Err()
	}
	return -1, true, nil
}

// isInternal reports Kafka's internal topics (Topic.isInternal).
func isInternal(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

// validTopicName applies Kafka's topic name rules (Topic.validate): 1 to
// 249 characters of [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
