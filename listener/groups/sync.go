package groups

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sync answers SyncGroup: the leader's assignments are kept (durably,
// before anyone is answered) and the group is Stable; a member waits
// until the leader's arrive or the group rebalances. In a Stable group a
// member gets its assignment at once. ctx ending returns its error.
func (c *Coordinator) Sync(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	ch, resp := c.sync(req)
	if resp != nil {
		return resp, nil
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Coordinator) sync(req *kmsg.SyncGroupRequest) (chan *kmsg.SyncGroupResponse, *kmsg.SyncGroupResponse) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Group == "" {
		return nil, syncError(codeInvalidGroupID)
	}
	g, code := c.lookup(req.Group, false, now)
	switch {
	case code != 0:
		return nil, syncError(code)
	case g == nil:
		return nil, syncError(codeUnknownMemberID)
	}
	if code := g.validateMember(req.MemberID, str(req.InstanceID)); code != 0 {
		return nil, syncError(code)
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol) {
		return nil, syncError(codeInconsistentGroupProtocol)
	}
	if req.Generation != g.generation {
		return nil, syncError(codeIllegalGeneration)
	}
	m := g.members[req.MemberID]
	m.deadline = now.Add(m.session)
	switch g.state {
	case PreparingRebalance:
		return nil, syncError(codeRebalanceInProgress)
	case Stable:
		return nil, c.syncResponse(g, m)
	}
	// CompletingRebalance.
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	if m.sync != nil { // a SyncGroup of the same member still waits: it is answered, not left waiting
		m.sync <- syncError(codeRebalanceInProgress)
	}
	m.sync = ch
	if m.id != g.leader {
		return ch, nil
	}
	given := map[string][]byte{}
	for _, a := range req.GroupAssignment {
		given[a.MemberID] = bytes.Clone(a.MemberAssignment) // the request's bytes are the connection's buffer (cloneProtocols)
	}
	for id, mm := range g.members {
		mm.assignment = given[id] // a member the leader left out gets an empty assignment
	}
	g.setState(Stable, now)
	if err := c.persist(g, nil); err != nil {
		// Kafka (resetAndPropagateAssignmentWithError): the members
		// waiting get the store's error, COORDINATOR_NOT_AVAILABLE (they
		// back off and look for the coordinator again), and the group
		// rebalances.
		c.log.Warn("consumer group: the assignment was not stored; rebalancing", "group", g.name, "err", err)
		for _, mm := range g.members {
			mm.assignment = nil
			if mm.sync != nil {
				mm.sync <- syncError(codeCoordinatorNotAvailable)
				mm.sync = nil
			}
		}
		c.prepareRebalance(g, now)
		return ch, nil
	}
	for _, mm := range g.members {
		if mm.sync != nil {
			mm.sync <- c.syncResponse(g, mm)
			mm.sync = nil
		}
		mm.deadline = now.Add(mm.session)
	}
	return ch, nil
}

func (c *Coordinator) syncResponse(g *group, m *member) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ProtocolType, r.Protocol = ptr(g.protocolType), ptr(g.protocol)
	r.MemberAssignment = m.assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// Heartbeat answers Heartbeat: it keeps the member's session and says
// REBALANCE_IN_PROGRESS while the group is in a join phase, so that the
// member rejoins.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := kmsg.NewPtrHeartbeatResponse()
	g, code := c.lookup(req.Group, false, now)
	switch {
	case req.Group == "":
		r.ErrorCode = codeInvalidGroupID
	case code != 0:
		r.ErrorCode = code
	case g == nil || g.state == Empty || g.state == Dead:
		r.ErrorCode = codeUnknownMemberID
	default:
		if r.ErrorCode = g.validateMember(req.MemberID, str(req.InstanceID)); r.ErrorCode != 0 {
			break
		}
		if req.Generation != g.generation {
			r.ErrorCode = codeIllegalGeneration
			break
		}
		m := g.members[req.MemberID]
		m.deadline = now.Add(m.session)
		if g.state == PreparingRebalance {
			r.ErrorCode = codeRebalanceInProgress
		}
	}
	return r
}

// Leave answers LeaveGroup: each member named leaves (v3+ names several,
// by member id or instance id), and the group rebalances.
func (c *Coordinator) Leave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := kmsg.NewPtrLeaveGroupResponse()
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g, code := c.lookup(req.Group, false, now)
	switch {
	case req.Group == "":
		r.ErrorCode = codeInvalidGroupID
		return r
	case code != 0:
		r.ErrorCode = code
		return r
	case g == nil:
		r.ErrorCode = codeUnknownMemberID
		return r
	}
	left := false
	for _, lm := range members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		id := lm.MemberID
		instance := str(lm.InstanceID)
		_, pending := g.pending[id]
		switch {
		case pending && instance == "": // a KIP-394 member id never used to join
			delete(g.pending, id)
			left = true
		case instance != "" && id == "": // by instance id alone (an admin removing a static member)
			if id = g.static[instance]; id == "" {
				rm.ErrorCode = codeUnknownMemberID
			}
		default:
			rm.ErrorCode = g.validateMember(id, instance)
		}
		if rm.ErrorCode == 0 && !pending {
			c.m.removed.WithLabelValues("left").Inc()
			g.remove(id, codeUnknownMemberID)
			left = true
		}
		r.Members = append(r.Members, rm)
	}
	if req.Version < 3 {
		r.ErrorCode, r.Members = r.Members[0].ErrorCode, nil
	}
	if left {
		switch g.state {
		case Stable, CompletingRebalance:
			c.prepareRebalance(g, now)
		case PreparingRebalance:
			if !g.initialDelay && g.allJoined() {
				c.completeJoin(g, now)
			}
		}
	}
	return r
}
