package groups

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/remotelog"
)

// State is a classic group's state, named as DescribeGroups and
// ListGroups give it (Kafka's ClassicGroupState).
type State string

// The states of a classic group.
const (
	Empty               State = "Empty"
	PreparingRebalance  State = "PreparingRebalance"
	CompletingRebalance State = "CompletingRebalance"
	Stable              State = "Stable"
	Dead                State = "Dead"
)

// member is one member of a group.
type member struct {
	id, instanceID       string // instanceID "" for a dynamic member
	clientID, clientHost string
	session, rebalance   time.Duration
	protocolType         string
	protocols            []kmsg.JoinGroupRequestProtocol
	assignment           []byte
	deadline             time.Time // session expiry, when not awaiting a response

	join chan *kmsg.JoinGroupResponse // set while a JoinGroup waits
	sync chan *kmsg.SyncGroupResponse // set while a SyncGroup waits
}

// metadata returns the member's metadata for protocol name.
func (m *member) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols are the member's, in order.
func (m *member) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(protocols) != len(m.protocols) {
		return false
	}
	for i, p := range protocols {
		if p.Name != m.protocols[i].Name || !bytes.Equal(p.Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// offset is one committed offset.
type offset struct {
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata"`
	CommitMs    int64  `json:"commit_ms"`
}

// group is one classic group.
type group struct {
	name         string
	state        State
	since        time.Time // when state last changed
	protocolType string    // "" until a member joins
	protocol     string    // the selected protocol of the generation
	generation   int32
	leader       string

	members map[string]*member
	static  map[string]string    // instance id -> member id
	pending map[string]time.Time // KIP-394 member ids handed out, until their session timeout

	joinDeadline time.Time // PreparingRebalance: when the join phase completes at the latest
	initialDelay bool      // PreparingRebalance from Empty: no early completion
	delayCap     time.Time // the latest an initial delay may extend to
	syncDeadline time.Time // CompletingRebalance: when members that did not sync are removed

	offsets map[remotelog.TopicPartition]offset
}

func newGroup(name string, now time.Time) *group {
	return &group{name: name, state: Empty, since: now, members: map[string]*member{}, static: map[string]string{},
		pending: map[string]time.Time{}, offsets: map[remotelog.TopicPartition]offset{}}
}

func (g *group) setState(s State, now time.Time) {
	if g.state != s {
		g.state, g.since = s, now
	}
}

// newMemberID is Kafka's form: the client id (or the instance id of a
// static member), a dash and a random UUID.
func newMemberID(clientID, instanceID string) string {
	var b [16]byte
	rand.Read(b[:])
	prefix := clientID
	if instanceID != "" {
		prefix = instanceID
	}
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// supports reports whether a member of protocolType with protocols may
// join: the group is empty, or the type is the group's and at least one
// protocol is one every member supports (Kafka's supportsProtocols).
func (g *group) supports(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	counts := g.protocolCounts()
	for _, p := range protocols {
		if counts[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

// protocolCounts is, for each protocol name, how many members support it
// (Kafka's ClassicGroup keeps the same counts): linear in the protocols,
// however many a member sends.
func (g *group) protocolCounts() map[string]int {
	counts := map[string]int{}
	seen := map[string]bool{}
	for _, m := range g.members {
		clear(seen)
		for _, p := range m.protocols {
			if !seen[p.Name] {
				seen[p.Name] = true
				counts[p.Name]++
			}
		}
	}
	return counts
}

// selectProtocol picks the generation's protocol: among those every
// member supports, the one most members list first (each member votes
// for its most preferred candidate); a tie goes to the leader's
// preference order.
func (g *group) selectProtocol() string {
	var order []string // candidates in some member's preference order
	var first *member
	if l, ok := g.members[g.leader]; ok {
		first = l
	} else {
		for _, m := range g.members {
			first = m
			break
		}
	}
	if first == nil {
		return ""
	}
	counts := g.protocolCounts()
	candidate := map[string]bool{}
	for _, p := range first.protocols {
		if counts[p.Name] == len(g.members) && !candidate[p.Name] {
			candidate[p.Name] = true
			order = append(order, p.Name)
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if candidate[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// acceptJoining is Kafka's acceptJoiningMember: whether member id (""
// for a new one) may join a group of at most max members. An Empty group
// takes anyone; during a join phase an existing member already waiting
// is taken, a new one while fewer than max wait; otherwise an existing
// member is taken, a new one while the group has fewer than max.
// Member ids handed out but not used yet (KIP-394) do not count.
func (g *group) acceptJoining(id string, max int) bool {
	m, known := g.members[id]
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		if known && m.join != nil {
			return true
		}
		waiting := 0
		for _, m := range g.members {
			if m.join != nil {
				waiting++
			}
		}
		return waiting < max
	}
	return known || len(g.members) < max
}

// allJoined reports whether every member waits in JoinGroup and no
// KIP-394 member id handed out is still to come.
func (g *group) allJoined() bool {
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return len(g.pending) == 0
}

// maxRebalance is the largest rebalance timeout of the members.
func (g *group) maxRebalance() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// remove drops a member, answering any request it has waiting with
// code.
func (g *group) remove(id string, code int16) {
	m, ok := g.members[id]
	if !ok {
		return
	}
	if m.join != nil {
		m.join <- &kmsg.JoinGroupResponse{ErrorCode: code, MemberID: id, Generation: -1}
		m.join = nil
	}
	if m.sync != nil {
		m.sync <- &kmsg.SyncGroupResponse{ErrorCode: code}
		m.sync = nil
	}
	delete(g.members, id)
	if m.instanceID != "" && g.static[m.instanceID] == id {
		delete(g.static, m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
		for other := range g.members {
			g.leader = other
			break
		}
	}
}

// subscribed returns the topics the members subscribe to, when the group
// speaks the consumer protocol and every member's subscription parses;
// ok is false otherwise (then no offset of a live group expires).
func (g *group) subscribed() (topics map[string]bool, ok bool) {
	if g.protocolType != "consumer" || g.protocol == "" {
		return nil, false
	}
	topics = map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(g.protocol)); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics, true
}
