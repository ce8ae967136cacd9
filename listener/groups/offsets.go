package groups

import (
	"encoding/json"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/remotelog"
)

// Committed is one committed offset as OffsetFetch gives it.
type Committed struct {
	Offset      int64
	LeaderEpoch int32 // -1 when the commit gave none
	Metadata    string
}

// Commit answers OffsetCommit (v0-v8). check gives, before anything
// else, a partition's own code (TOPIC_AUTHORIZATION_FAILED,
// UNKNOWN_TOPIC_OR_PARTITION; 0 to go on). The group checks are Kafka's
// (ClassicGroup.validateOffsetCommit): a commit with generation -1 and no
// member id is accepted only while the group is Empty (or new: a
// "simple" group is made), otherwise the member and generation must be
// the group's (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION)
// and the group not awaiting its assignment (REBALANCE_IN_PROGRESS). The
// offsets are durable when the answer is sent.
func (c *Coordinator) Commit(req *kmsg.OffsetCommitRequest, check func(topic string, partition int32) int16) *kmsg.OffsetCommitResponse {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	code := c.commitCode(req, now)
	resp := kmsg.NewPtrOffsetCommitResponse()
	write := map[remotelog.TopicPartition][]byte{}
	kept := map[remotelog.TopicPartition]offset{}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = check(t.Topic, p.Partition)
			switch {
			case rp.ErrorCode != 0:
			case code != 0:
				rp.ErrorCode = code
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.OffsetMetadataMaxBytes:
				rp.ErrorCode = codeOffsetMetadataTooLarge
			default:
				o := offset{Offset: p.Offset, LeaderEpoch: -1, Metadata: str(p.Metadata), CommitMs: now.UnixMilli()}
				if req.Version >= 6 {
					o.LeaderEpoch = p.LeaderEpoch
				}
				if req.Version == 1 && p.Timestamp >= 0 {
					o.CommitMs = p.Timestamp
				}
				tp := remotelog.TopicPartition{Topic: t.Topic, Partition: p.Partition}
				v, _ := json.Marshal(o)
				write[tp], kept[tp] = v, o
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(write) == 0 {
		if g, ok := c.groups[req.Group]; ok {
			c.dropIfUnused(g) // a simple commit refused for every partition leaves no group behind
		}
		return resp
	}
	g := c.groups[req.Group]
	if err := c.store.WriteGroup(g.name, nil, write); err != nil {
		c.m.commitFailures.Inc()
		c.log.Warn("consumer group: offsets not stored", "group", g.name, "partitions", len(write), "err", err)
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = codeCoordinatorNotAvailable
				}
			}
		}
		c.dropIfUnused(g)
		return resp
	}
	for tp, o := range kept {
		g.offsets[tp] = o
	}
	c.m.committed.Add(float64(len(kept)))
	return resp
}

// commitCode is the group's code for a commit: 0 when it may go on.
func (c *Coordinator) commitCode(req *kmsg.OffsetCommitRequest, now time.Time) int16 {
	if req.Group == "" {
		return codeInvalidGroupID
	}
	instance := str(req.InstanceID)
	simple := req.Generation < 0 && req.MemberID == "" && instance == ""
	g, code := c.lookup(req.Group, simple, now)
	switch {
	case code != 0:
		return code
	case g == nil:
		return codeIllegalGeneration // Kafka's answer below OffsetCommit v9 for a group that does not exist
	case g.state == Dead:
		return codeCoordinatorNotAvailable
	case req.Generation < 0 && g.state == Empty:
		return 0
	case req.Generation >= 0 || req.MemberID != "" || instance != "":
		if code := g.validateMember(req.MemberID, instance); code != 0 {
			return code
		}
		if req.Generation != g.generation {
			return codeIllegalGeneration
		}
	default:
		return codeUnknownMemberID // a simple commit to a group with members
	}
	if g.state == CompletingRebalance {
		return codeRebalanceInProgress
	}
	if m := g.members[req.MemberID]; m != nil {
		m.deadline = now.Add(m.session) // a commit is a sign of life too
	}
	return 0
}

// Offsets returns group's committed offsets (none for a group that does
// not exist) and a code for the whole group: COORDINATOR_LOAD_IN_PROGRESS
// while loading, INVALID_GROUP_ID for "".
func (c *Coordinator) Offsets(group string) (map[remotelog.TopicPartition]Committed, int16) {
	if group == "" {
		return nil, codeInvalidGroupID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, code := c.lookup(group, false, c.now())
	if code != 0 || g == nil {
		return nil, code
	}
	out := make(map[remotelog.TopicPartition]Committed, len(g.offsets))
	for tp, o := range g.offsets {
		out[tp] = Committed{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	return out, 0
}

// DeleteOffsets answers OffsetDelete (KIP-496): the group's offsets of
// the partitions named go, unless the group has members subscribed to
// the topic (GROUP_SUBSCRIBED_TO_TOPIC). Codes: the group's
// (GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NON_EMPTY_GROUP for a group with
// members whose subscriptions cannot be read) and per partition.
func (c *Coordinator) DeleteOffsets(group string, partitions []remotelog.TopicPartition) (int16, map[remotelog.TopicPartition]int16) {
	if group == "" {
		return codeInvalidGroupID, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, code := c.lookup(group, false, c.now())
	switch {
	case code != 0:
		return code, nil
	case g == nil || g.state == Dead:
		return codeGroupIDNotFound, nil
	}
	per := map[remotelog.TopicPartition]int16{}
	var subs map[string]bool
	if g.state != Empty {
		var ok bool
		if subs, ok = g.subscribed(); !ok {
			return codeNonEmptyGroup, nil
		}
	}
	var gone []remotelog.TopicPartition
	for _, tp := range partitions {
		if subs[tp.Topic] {
			per[tp] = codeGroupSubscribedToTopic
			continue
		}
		per[tp] = 0
		if _, ok := g.offsets[tp]; ok {
			gone = append(gone, tp)
		}
	}
	if len(gone) > 0 {
		if err := c.store.DeleteGroup(g.name, gone); err != nil {
			c.log.Warn("consumer group: offsets not deleted", "group", g.name, "err", err)
			return codeCoordinatorNotAvailable, nil
		}
		for _, tp := range gone {
			delete(g.offsets, tp)
		}
		c.m.expired.Add(float64(len(gone)))
	}
	return 0, per
}

// ExpireOffsets removes the offsets that offsets.retention.minutes has
// passed for (KIP-211): every offset of a group Empty for that long
// (counted from the later of the commit and the group becoming empty),
// and in a consumer group with members the offsets of topics no member
// subscribes to, counted from their commit. An Empty group left without
// offsets is deleted. Run calls it every
// offsets.retention.check.interval.ms.
func (c *Coordinator) ExpireOffsets() {
	c.mu.Lock()
	names := make([]string, 0, len(c.groups))
	for name := range c.groups {
		names = append(names, name)
	}
	c.mu.Unlock()
	for _, name := range names { // one group at a time: heartbeats and commits of the others go on between
		c.expireGroup(name)
	}
}

// expireGroup expires one group's offsets (ExpireOffsets' rules).
func (c *Coordinator) expireGroup(name string) {
	now := c.now()
	retention := time.Duration(c.cfg.OffsetsRetentionMinutes) * time.Minute
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[name]
	if !ok {
		return
	}
	var subs map[string]bool
	if g.state != Empty {
		var ok bool
		if subs, ok = g.subscribed(); !ok {
			return
		}
	}
	var gone []remotelog.TopicPartition
	for tp, o := range g.offsets {
		base := time.UnixMilli(o.CommitMs)
		if g.state == Empty && g.since.After(base) {
			base = g.since
		}
		if !subs[tp.Topic] && !now.Before(base.Add(retention)) {
			gone = append(gone, tp)
		}
	}
	all := g.state == Empty && len(gone) == len(g.offsets) && len(g.members) == 0 && len(g.pending) == 0
	var parts []remotelog.TopicPartition
	if !all {
		if len(gone) == 0 {
			return
		}
		parts = gone
	}
	if err := c.store.DeleteGroup(name, parts); err != nil {
		c.log.Warn("consumer group: expired offsets not deleted", "group", name, "err", err)
		return
	}
	for _, tp := range gone {
		delete(g.offsets, tp)
	}
	c.m.expired.Add(float64(len(gone)))
	if all {
		g.setState(Dead, now)
		delete(c.groups, name)
	}
	c.log.Info("consumer group offsets expired (offsets.retention.minutes)", "group", name, "partitions", len(gone), "group_deleted", all)
}
