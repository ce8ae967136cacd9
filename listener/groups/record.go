package groups

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// record is a group's durable record (doc.go, "Records"), JSON.
type record struct {
	Version      int            `json:"version"` // 1
	ProtocolType string         `json:"protocol_type"`
	Protocol     string         `json:"protocol"`
	Generation   int32          `json:"generation"`
	Leader       string         `json:"leader"`
	SinceMs      int64          `json:"since_ms"` // when the group reached its state
	Members      []memberRecord `json:"members"`
}

type memberRecord struct {
	ID          string `json:"id"`
	InstanceID  string `json:"instance_id,omitempty"`
	ClientID    string `json:"client_id"`
	ClientHost  string `json:"client_host"`
	SessionMs   int64  `json:"session_ms"`
	RebalanceMs int64  `json:"rebalance_ms"`
	Metadata    []byte `json:"metadata"`   // the member's metadata for Protocol
	Assignment  []byte `json:"assignment"` // the leader's assignment to it
}

// encode returns g's record: its generation and, when Stable, its members
// with their assignments (a group in a join phase is stored as its last
// stable generation would be rebuilt: members rejoin after a restart).
func (g *group) encode() ([]byte, error) {
	r := record{Version: 1, ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation, Leader: g.leader, SinceMs: g.since.UnixMilli()}
	if g.state == Stable {
		for _, m := range g.members {
			r.Members = append(r.Members, memberRecord{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
				SessionMs: m.session.Milliseconds(), RebalanceMs: m.rebalance.Milliseconds(), Metadata: m.metadata(g.protocol), Assignment: m.assignment})
		}
	}
	return json.Marshal(r)
}

// decode sets g from a record: Stable with its members (their sessions
// start at now) when it has any, Empty otherwise.
func (g *group) decode(b []byte, now time.Time) error {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	if r.Version != 1 {
		return fmt.Errorf("group record version %d: this tierd reads version 1", r.Version)
	}
	g.protocolType, g.protocol, g.generation, g.leader = r.ProtocolType, r.Protocol, r.Generation, r.Leader
	g.since = time.UnixMilli(r.SinceMs)
	for _, mr := range r.Members {
		m := &member{id: mr.ID, instanceID: mr.InstanceID, clientID: mr.ClientID, clientHost: mr.ClientHost,
			session: time.Duration(mr.SessionMs) * time.Millisecond, rebalance: time.Duration(mr.RebalanceMs) * time.Millisecond,
			protocolType: r.ProtocolType, protocols: []kmsg.JoinGroupRequestProtocol{{Name: r.Protocol, Metadata: mr.Metadata}},
			assignment: mr.Assignment}
		m.deadline = now.Add(m.session)
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
	}
	g.state = Empty
	if len(g.members) > 0 {
		g.state = Stable
		if _, ok := g.members[g.leader]; !ok {
			return fmt.Errorf("group record: leader %q is not a member", g.leader)
		}
	} else {
		g.protocol, g.leader = "", ""
	}
	return nil
}
