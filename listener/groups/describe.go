package groups

import (
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Listed is one group as ListGroups gives it.
type Listed struct {
	Group, ProtocolType string
	State               State
}

// List returns the groups, sorted by name, whose state is one of states
// (compared as Kafka does, ignoring case; none: every state). Code
// COORDINATOR_LOAD_IN_PROGRESS while loading.
func (c *Coordinator) List(states []string) ([]Listed, int16) {
	if !c.loaded.Load() {
		return nil, codeCoordinatorLoadInProgress
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Listed
	for _, g := range c.groups {
		if len(states) > 0 && !containsFold(states, string(g.state)) {
			continue
		}
		out = append(out, Listed{Group: g.name, ProtocolType: g.protocolType, State: g.state})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, 0
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// Describe returns group as DescribeGroups gives it: a group that does
// not exist is Dead with no members (Kafka's answer below v6); members'
// metadata and assignments are given only while the group is Stable, as
// Kafka does.
func (c *Coordinator) Describe(group string) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = group
	if !c.loaded.Load() {
		d.ErrorCode = codeCoordinatorLoadInProgress
		return d
	}
	if group == "" {
		d.ErrorCode = codeInvalidGroupID
		return d
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[group]
	if !ok {
		d.State = string(Dead)
		return d
	}
	d.State, d.ProtocolType = string(g.state), g.protocolType
	if g.state == Stable {
		d.Protocol = g.protocol
	}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, ptrOrNil(m.instanceID), m.clientID, m.clientHost
		if g.state == Stable {
			dm.ProtocolMetadata, dm.MemberAssignment = m.metadata(g.protocol), m.assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// Delete answers DeleteGroups for one group: an Empty group (its record
// and offsets) goes; GROUP_ID_NOT_FOUND when there is none,
// NON_EMPTY_GROUP when it has members.
func (c *Coordinator) Delete(group string) int16 {
	if group == "" {
		return codeInvalidGroupID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, code := c.lookup(group, false, c.now())
	switch {
	case code != 0:
		return code
	case g == nil || g.state == Dead:
		return codeGroupIDNotFound
	case g.state != Empty || len(g.pending) > 0:
		return codeNonEmptyGroup
	}
	if err := c.store.DeleteGroup(group, nil); err != nil {
		c.log.Warn("consumer group: not deleted", "group", group, "err", err)
		return codeCoordinatorNotAvailable
	}
	g.setState(Dead, c.now())
	delete(c.groups, group)
	c.log.Info("consumer group deleted (DeleteGroups)", "group", group, "offsets", len(g.offsets))
	return 0
}
