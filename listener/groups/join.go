package groups

import (
	"bytes"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is who sends a request: the client id of its header and the
// client's host (as DescribeGroups reports it, "/" and the address).
type Client struct {
	ID, Host string
}

// Join answers JoinGroup (Kafka's classic protocol, with KIP-394's
// MEMBER_ID_REQUIRED from v4, KIP-345's static members from v5 and
// KIP-814's skip_assignment from v9). It waits, as a broker does, until
// the join phase completes (every member rejoined, the rebalance timeout,
// or, for a group that was empty, group.initial.rebalance.delay.ms), or
// ctx ends (ctx's error; the member stays until its timeouts remove it).
func (c *Coordinator) Join(ctx context.Context, cl Client, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	ch, resp := c.join(cl, req)
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

func (c *Coordinator) join(cl Client, req *kmsg.JoinGroupRequest) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	instance := str(req.InstanceID)
	switch {
	case req.Group == "":
		return nil, joinError(req.MemberID, codeInvalidGroupID)
	case req.SessionTimeoutMillis < c.cfg.MinSessionTimeoutMs || req.SessionTimeoutMillis > c.cfg.MaxSessionTimeoutMs:
		return nil, joinError(req.MemberID, codeInvalidSessionTimeout)
	}
	g, code := c.lookup(req.Group, req.MemberID == "", now)
	if code != 0 {
		return nil, joinError(req.MemberID, code)
	}
	if g == nil { // a member id for a group that does not exist
		return nil, joinError(req.MemberID, codeUnknownMemberID)
	}
	defer c.dropIfUnused(g)
	if !g.supports(req.ProtocolType, req.Protocols) {
		return nil, joinError(req.MemberID, codeInconsistentGroupProtocol)
	}
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalance = time.Duration(req.SessionTimeoutMillis) * time.Millisecond // v0 has none: the session timeout
	}
	m := &member{clientID: cl.ID, clientHost: cl.Host, instanceID: instance, session: time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		rebalance: rebalance, protocolType: req.ProtocolType, protocols: cloneProtocols(req.Protocols)}
	if req.MemberID == "" {
		if !g.acceptJoining("", c.cfg.MaxSize) {
			return nil, joinError("", codeGroupMaxSizeReached)
		}
		m.id = newMemberID(cl.ID, instance)
		switch {
		case instance != "" && g.static[instance] != "":
			return c.replaceStatic(g, g.static[instance], m, req.Version, now)
		case instance == "" && req.Version >= 4: // KIP-394: come back with this id
			g.pending[m.id] = now.Add(m.session)
			return nil, joinError(m.id, codeMemberIDRequired)
		}
		return c.add(g, m, now), nil
	}
	if _, ok := g.pending[req.MemberID]; ok && instance == "" {
		delete(g.pending, req.MemberID)
		if !g.acceptJoining(req.MemberID, c.cfg.MaxSize) {
			return nil, joinError("", codeGroupMaxSizeReached)
		}
		m.id = req.MemberID
		return c.add(g, m, now), nil
	}
	if code := g.validateMember(req.MemberID, instance); code != 0 {
		return nil, joinError(req.MemberID, code)
	}
	cur := g.members[req.MemberID]
	switch {
	case g.state == PreparingRebalance,
		g.state == CompletingRebalance && !cur.matches(req.Protocols),
		g.state == Stable && (g.leader == cur.id || !cur.matches(req.Protocols)):
		cur.update(m)
		return c.wait(g, cur, now), nil
	}
	// Nothing changed: this generation's answer again (a member that lost
	// its JoinGroup response).
	r := c.joinResponse(g, cur.id, g.state == CompletingRebalance && g.leader == cur.id)
	return nil, r
}

// cloneProtocols copies protocols and their metadata: a decoded request's
// bytes alias the connection's read buffer, which the next request
// reuses, and a member keeps its protocols across requests.
func cloneProtocols(protocols []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(protocols))
	for i, p := range protocols {
		out[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	return out
}

// update takes a rejoining member's protocols and timeouts.
func (m *member) update(from *member) {
	m.protocols, m.protocolType = from.protocols, from.protocolType
	m.session, m.rebalance = from.session, from.rebalance
	m.clientID, m.clientHost = from.clientID, from.clientHost
}

// validateMember is Kafka's ClassicGroup.validateMember: a static
// member's instance id must map to its member id (FENCED_INSTANCE_ID
// otherwise), and the member must be known (UNKNOWN_MEMBER_ID).
func (g *group) validateMember(id, instance string) int16 {
	if instance != "" {
		switch mapped := g.static[instance]; {
		case mapped == "":
			return codeUnknownMemberID
		case mapped != id:
			return codeFencedInstanceID
		}
	}
	if _, ok := g.members[id]; !ok {
		return codeUnknownMemberID
	}
	return 0
}

// add puts a new member in g and has it wait for the join phase.
func (c *Coordinator) add(g *group, m *member, now time.Time) chan *kmsg.JoinGroupResponse {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	if m.instanceID != "" {
		g.static[m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
	if g.initialDelay && g.state == PreparingRebalance { // each new member extends the initial delay
		g.joinDeadline = minTime(now.Add(time.Duration(c.cfg.InitialRebalanceDelayMs)*time.Millisecond), g.delayCap)
	}
	return c.wait(g, m, now)
}

// wait makes m wait for the join phase, starting a rebalance unless one
// is under way, and completes the phase when m was the last to come.
func (c *Coordinator) wait(g *group, m *member, now time.Time) chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	if m.join != nil { // a JoinGroup of the same member still waits (a client that retried): it is answered, not left waiting
		m.join <- joinError(m.id, codeRebalanceInProgress)
	}
	m.join = ch
	if g.state != PreparingRebalance {
		c.prepareRebalance(g, now)
	} else if !g.initialDelay && g.allJoined() {
		c.completeJoin(g, now)
	}
	return ch
}

// replaceStatic is a static member rejoining with an unknown member id
// (KIP-345): it takes the old member's place under a new id (the old id
// is fenced). In a Stable group whose protocol would not change, it gets
// the current generation at once, with no rebalance; otherwise the group
// rebalances.
func (c *Coordinator) replaceStatic(g *group, oldID string, m *member, version int16, now time.Time) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	old := g.members[oldID]
	wasLeader := g.leader == oldID
	delete(g.members, oldID)
	m.assignment = old.assignment
	g.members[m.id] = m
	g.static[m.instanceID] = m.id
	if wasLeader {
		g.leader = m.id
	}
	m.deadline = now.Add(m.session)
	if g.state == Stable && g.selectProtocol() == g.protocol {
		if err := c.persist(g, nil); err != nil {
			// Kafka reverts to the old member (its id stays the
			// instance's) and answers the store's error.
			c.log.Warn("consumer group: a static member's new id was not stored", "group", g.name, "err", err)
			delete(g.members, m.id)
			g.members[oldID], g.static[m.instanceID] = old, oldID
			if wasLeader {
				g.leader = oldID
			}
			return nil, joinError("", codeCoordinatorNotAvailable)
		}
	}
	if old.join != nil {
		old.join <- joinError(oldID, codeFencedInstanceID)
		old.join = nil
	}
	if old.sync != nil {
		old.sync <- syncError(codeFencedInstanceID)
		old.sync = nil
	}
	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol {
			leader := g.leader == m.id
			r := c.joinResponse(g, m.id, leader && version >= 9)
			r.SkipAssignment = leader && version >= 9
			return nil, r
		}
		return c.wait(g, m, now), nil
	case CompletingRebalance:
		ch := make(chan *kmsg.JoinGroupResponse, 1)
		m.join = ch
		c.prepareRebalance(g, now)
		return ch, nil
	}
	return c.wait(g, m, now), nil // PreparingRebalance
}

// prepareRebalance starts a join phase: members waiting in SyncGroup are
// told REBALANCE_IN_PROGRESS, and the phase completes when every member
// rejoined or at the largest rebalance timeout; a group that was empty
// waits group.initial.rebalance.delay.ms first.
func (c *Coordinator) prepareRebalance(g *group, now time.Time) {
	for _, m := range g.members {
		if m.sync != nil {
			m.sync <- syncError(codeRebalanceInProgress)
			m.sync = nil
		}
	}
	g.initialDelay = g.state == Empty && c.cfg.InitialRebalanceDelayMs > 0
	if g.initialDelay {
		g.delayCap = now.Add(g.maxRebalance())
		g.joinDeadline = minTime(now.Add(time.Duration(c.cfg.InitialRebalanceDelayMs)*time.Millisecond), g.delayCap)
	} else {
		g.joinDeadline = now.Add(g.maxRebalance())
	}
	g.setState(PreparingRebalance, now)
	if !g.initialDelay && g.allJoined() { // no member to wait for (the last one left)
		c.completeJoin(g, now)
	}
}

// completeJoin ends the join phase: members that did not rejoin are
// removed, the generation moves on with the protocol most members
// prefer, and every waiting member gets its JoinGroup answer (the leader
// with every member's metadata); the group then waits for the leader's
// SyncGroup (CompletingRebalance), or is Empty without members.
func (c *Coordinator) completeJoin(g *group, now time.Time) {
	for id, m := range g.members {
		if m.join == nil {
			c.log.Info("consumer group member did not rejoin in time: removed", "group", g.name, "member", id)
			c.m.removed.WithLabelValues("not_rejoined").Inc()
			g.remove(id, codeUnknownMemberID)
		}
	}
	g.generation++
	g.initialDelay = false
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setState(Empty, now)
		if err := c.persist(g, nil); err != nil {
			c.log.Warn("consumer group: the empty generation was not stored", "group", g.name, "err", err)
		}
		return
	}
	if _, ok := g.members[g.leader]; !ok {
		for id := range g.members {
			g.leader = id
			break
		}
	}
	c.m.rebalances.Inc()
	g.protocol = g.selectProtocol()
	g.setState(CompletingRebalance, now)
	g.syncDeadline = now.Add(g.maxRebalance())
	for _, m := range g.members {
		m.assignment = nil
		m.deadline = now.Add(m.session)
		m.join <- c.joinResponse(g, m.id, m.id == g.leader)
		m.join = nil
	}
}

// joinResponse is the generation's JoinGroup answer to member id; the
// leader's (withMembers) lists every member with its metadata for the
// generation's protocol.
func (c *Coordinator) joinResponse(g *group, id string, withMembers bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Generation, r.MemberID, r.LeaderID = g.generation, id, g.leader
	r.ProtocolType, r.Protocol = ptr(g.protocolType), ptr(g.protocol)
	if withMembers {
		for _, m := range g.members {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = m.id, ptrOrNil(m.instanceID), m.metadata(g.protocol)
			r.Members = append(r.Members, jm)
		}
	}
	return r
}

// dropIfUnused forgets a group that a refused request created: empty, no
// generation, no offsets. Called with c.mu held.
func (c *Coordinator) dropIfUnused(g *group) {
	if g.state == Empty && g.generation == 0 && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 {
		delete(c.groups, g.name)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func ptr(s string) *string { return &s }

func ptrOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func joinError(member string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode, r.MemberID, r.Generation = code, member, -1
	return r
}

func syncError(code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	return r
}
