package groups

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/remotelog"
)

// Status returns the groups (the one named, or every group for ""),
// sorted by name, each with its members and its committed offsets sorted
// by partition; the lag of each comes from WithHighWatermarks (-1
// without it, or when the lookup fails or ctx ends).
func (c *Coordinator) Status(ctx context.Context, group string) []remotelog.ConsumerGroupStatus {
	c.mu.Lock()
	var out []remotelog.ConsumerGroupStatus
	for name, g := range c.groups {
		if group != "" && name != group {
			continue
		}
		s := remotelog.ConsumerGroupStatus{Group: name, State: string(g.state), ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation}
		for _, m := range g.members {
			ms := remotelog.GroupMemberStatus{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
			if g.protocolType == "consumer" && len(m.assignment) > 0 {
				var a kmsg.ConsumerMemberAssignment
				if a.ReadFrom(m.assignment) == nil {
					for _, t := range a.Topics {
						for _, p := range t.Partitions {
							ms.Assigned = append(ms.Assigned, remotelog.TopicPartition{Topic: t.Topic, Partition: p})
						}
					}
				}
			}
			sortPartitions(ms.Assigned)
			s.Members = append(s.Members, ms)
		}
		sort.Slice(s.Members, func(i, j int) bool { return s.Members[i].MemberID < s.Members[j].MemberID })
		for tp, o := range g.offsets {
			s.Offsets = append(s.Offsets, remotelog.GroupOffsetStatus{TopicPartition: tp, Committed: o.Offset, HighWatermark: -1, Lag: -1})
		}
		sort.Slice(s.Offsets, func(i, j int) bool { return lessPartition(s.Offsets[i].TopicPartition, s.Offsets[j].TopicPartition) })
		out = append(out, s)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	if c.hw == nil {
		return out
	}
	hw := c.highWatermarks(ctx)
	for i := range out {
		for j := range out[i].Offsets {
			o := &out[i].Offsets[j]
			if v, ok := hw(o.TopicPartition); ok {
				o.HighWatermark, o.Lag = v, max(v-o.Committed, 0)
			}
		}
	}
	return out
}

// highWatermarks returns a lookup of WithHighWatermarks' answers that
// asks once per partition (ok false when the lookup failed).
func (c *Coordinator) highWatermarks(ctx context.Context) func(remotelog.TopicPartition) (int64, bool) {
	seen := map[remotelog.TopicPartition]int64{}
	return func(tp remotelog.TopicPartition) (int64, bool) {
		v, ok := seen[tp]
		if !ok {
			var err error
			if v, err = c.hw(ctx, tp); err != nil {
				v = -1
			}
			seen[tp] = v
		}
		return v, v >= 0
	}
}

func lessPartition(a, b remotelog.TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

func sortPartitions(tps []remotelog.TopicPartition) {
	sort.Slice(tps, func(i, j int) bool { return lessPartition(tps[i], tps[j]) })
}
