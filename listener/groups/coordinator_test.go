package groups

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener/groups/groupstest"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type rig struct {
	assign func(member string) string // the leader's assignment to a member; default "for-" and its id
	t      *testing.T
	c      *Coordinator
	clk    *clock
	store  *groupstest.MemStore
}

func newRig(t *testing.T, mod ...func(*Config)) *rig {
	t.Helper()
	store := groupstest.NewMemStore()
	return newRigOn(t, store, &clock{now: time.UnixMilli(1_700_000_000_000)}, mod...)
}

func newRigOn(t *testing.T, store *groupstest.MemStore, clk *clock, mod ...func(*Config)) *rig {
	t.Helper()
	cfg := DefaultConfig()
	for _, m := range mod {
		m(&cfg)
	}
	c, err := New(cfg, store, withClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, c: c, clk: clk, store: store}
}

// consumerMeta is a consumer protocol subscription to topics.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func joinReq(group, member, instance string, version int16) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID = version, group, member
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 30000
	if instance != "" {
		r.InstanceID = &instance
	}
	r.ProtocolType = "consumer"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta("orders")}}
	return r
}

// join sends a JoinGroup and returns a channel of its answer.
func (r *rig) join(req *kmsg.JoinGroupRequest) chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		resp, err := r.c.Join(context.Background(), Client{ID: "cl", Host: "/127.0.0.1"}, req)
		if err != nil {
			r.t.Error(err)
		}
		ch <- resp
	}()
	return ch
}

func (r *rig) recv(ch chan *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	r.t.Helper()
	select {
	case resp := <-ch:
		return resp
	case <-time.After(5 * time.Second):
		r.t.Fatal("JoinGroup did not answer")
		return nil
	}
}

// joined runs the KIP-394 two-step join of a new dynamic member and
// returns its channel and member id.
func (r *rig) newMember(group string) (chan *kmsg.JoinGroupResponse, string) {
	r.t.Helper()
	first := r.recv(r.join(joinReq(group, "", "", 5)))
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		r.t.Fatalf("first join: code %d member %q, want MEMBER_ID_REQUIRED and an id", first.ErrorCode, first.MemberID)
	}
	return r.join(joinReq(group, first.MemberID, "", 5)), first.MemberID
}

func (r *rig) sync(group, member string, gen int32, assign map[string]string) chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 5, group, member, gen
	for m, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() {
		resp, err := r.c.Sync(context.Background(), req)
		if err != nil {
			r.t.Error(err)
		}
		ch <- resp
	}()
	return ch
}

func recvSync(t *testing.T, ch chan *kmsg.SyncGroupResponse) *kmsg.SyncGroupResponse {
	t.Helper()
	select {
	case resp := <-ch:
		return resp
	case <-time.After(5 * time.Second):
		t.Fatal("SyncGroup did not answer")
		return nil
	}
}

func (r *rig) heartbeat(group, member string, gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	return r.c.Heartbeat(req).ErrorCode
}

func (r *rig) state(group string) State {
	return State(r.c.Describe(group).State)
}

// waitFor polls cond until it holds (a request sent from a goroutine has
// reached the coordinator); the test fails after 5 s.
func (r *rig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			r.t.Fatalf("waiting for %s", what)
		}
	}
}

// waitState waits until group is in state.
func (r *rig) waitState(group string, state State) {
	r.t.Helper()
	r.waitFor("group "+group+" "+string(state), func() bool { return r.state(group) == state })
}

// joining waits until n members of group are in, then lets
// group.initial.rebalance.delay.ms pass so that the join phase completes.
func (r *rig) joining(group string, n int) {
	r.t.Helper()
	r.waitFor("members joining", func() bool { return len(r.c.Describe(group).Members) == n })
	r.clk.add(time.Duration(r.c.cfg.InitialRebalanceDelayMs)*time.Millisecond + time.Millisecond)
	r.c.tickAll(r.clk.Now())
}

// keepAlive lets d pass in steps of 5 s, with a heartbeat from each
// member and the timers run at every step (members inside their 10 s
// sessions).
func (r *rig) keepAlive(d time.Duration, group string, gen int32, members ...string) {
	for step := 5 * time.Second; d > 0; d -= step {
		r.clk.add(min(step, d))
		for _, m := range members {
			r.heartbeat(group, m, gen)
		}
		r.c.tickAll(r.clk.Now())
	}
}

// stable makes a Stable group of n dynamic members; it returns their ids
// (the leader first) and the generation.
func (r *rig) stable(group string, n int) ([]string, int32) {
	r.t.Helper()
	var chans []chan *kmsg.JoinGroupResponse
	for i := 0; i < n; i++ {
		ch, _ := r.newMember(group)
		chans = append(chans, ch)
	}
	r.joining(group, n)
	var leader string
	var ids []string
	var gen int32
	for _, ch := range chans {
		resp := r.recv(ch)
		if resp.ErrorCode != 0 {
			r.t.Fatalf("join: code %d", resp.ErrorCode)
		}
		gen, leader = resp.Generation, resp.LeaderID
		ids = append(ids, resp.MemberID)
	}
	assign := map[string]string{}
	var syncs []chan *kmsg.SyncGroupResponse
	for _, id := range ids {
		assign[id] = "for-" + id
		if r.assign != nil {
			assign[id] = r.assign(id)
		}
	}
	for _, id := range ids {
		if id != leader {
			syncs = append(syncs, r.sync(group, id, gen, nil))
		}
	}
	syncs = append(syncs, r.sync(group, leader, gen, assign))
	for _, ch := range syncs {
		if resp := recvSync(r.t, ch); resp.ErrorCode != 0 || (r.assign == nil && !strings.HasPrefix(string(resp.MemberAssignment), "for-")) {
			r.t.Fatalf("sync: code %d assignment %q", resp.ErrorCode, resp.MemberAssignment)
		}
	}
	out := []string{leader}
	for _, id := range ids {
		if id != leader {
			out = append(out, id)
		}
	}
	return out, gen
}

func TestJoinSyncHeartbeat(t *testing.T) {
	r := newRig(t)
	ids, gen := r.stable("g", 3)
	if gen != 1 || r.state("g") != Stable {
		t.Fatalf("generation %d state %s", gen, r.state("g"))
	}
	d := r.c.Describe("g")
	if len(d.Members) != 3 || d.Protocol != "range" || d.ProtocolType != "consumer" {
		t.Fatalf("described %+v", d)
	}
	for _, m := range d.Members {
		if string(m.MemberAssignment) != "for-"+m.MemberID || m.ClientHost != "/127.0.0.1" {
			t.Errorf("member %s: assignment %q host %q", m.MemberID, m.MemberAssignment, m.ClientHost)
		}
	}
	for _, id := range ids {
		if code := r.heartbeat("g", id, gen); code != 0 {
			t.Errorf("heartbeat of %s: %d", id, code)
		}
	}
	for _, c := range []struct {
		member string
		gen    int32
		want   *kerr.Error
	}{{ids[0], gen + 1, kerr.IllegalGeneration}, {"nobody", gen, kerr.UnknownMemberID}} {
		if code := r.heartbeat("g", c.member, c.gen); code != c.want.Code {
			t.Errorf("heartbeat %s gen %d: %d, want %s", c.member, c.gen, code, c.want.Message)
		}
	}
	if code := r.heartbeat("no-such-group", "m", 1); code != kerr.UnknownMemberID.Code {
		t.Errorf("heartbeat to a group that does not exist: %d", code)
	}
	// A member rejoining with the same protocols while Stable gets this
	// generation again (no rebalance); the leader rejoining rebalances.
	if resp := r.recv(r.join(joinReq("g", ids[1], "", 5))); resp.Generation != gen || resp.ErrorCode != 0 || r.state("g") != Stable {
		t.Fatalf("follower rejoin: %+v, state %s", resp, r.state("g"))
	}
	r.join(joinReq("g", ids[0], "", 5))
	r.waitState("g", PreparingRebalance)
	if code := r.heartbeat("g", ids[2], gen); code != kerr.RebalanceInProgress.Code {
		t.Errorf("heartbeat during the rebalance: %d", code)
	}
}

func TestJoinRefusals(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxSize = 2 })
	for name, c := range map[string]struct {
		mod  func(*kmsg.JoinGroupRequest)
		want *kerr.Error
	}{
		"empty group id":      {func(q *kmsg.JoinGroupRequest) { q.Group = "" }, kerr.InvalidGroupID},
		"session too short":   {func(q *kmsg.JoinGroupRequest) { q.SessionTimeoutMillis = 10 }, kerr.InvalidSessionTimeout},
		"session too long":    {func(q *kmsg.JoinGroupRequest) { q.SessionTimeoutMillis = 1 << 30 }, kerr.InvalidSessionTimeout},
		"no protocols":        {func(q *kmsg.JoinGroupRequest) { q.Protocols = nil }, kerr.InconsistentGroupProtocol},
		"unknown member id":   {func(q *kmsg.JoinGroupRequest) { q.MemberID = "made-up" }, kerr.UnknownMemberID},
		"unknown member, new": {func(q *kmsg.JoinGroupRequest) { q.MemberID, q.Group = "made-up", "fresh" }, kerr.UnknownMemberID},
	} {
		q := joinReq("g", "", "", 5)
		c.mod(q)
		if resp := r.recv(r.join(q)); resp.ErrorCode != c.want.Code {
			t.Errorf("%s: code %d, want %s", name, resp.ErrorCode, c.want.Message)
		}
	}
	if groups, _ := r.c.List(nil); len(groups) != 0 {
		t.Errorf("refused joins left groups behind: %+v", groups)
	}
	r.stable("g", 2)
	other := joinReq("g", "", "", 5)
	other.ProtocolType = "connect"
	if resp := r.recv(r.join(other)); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("another protocol type: %d", resp.ErrorCode)
	}
	if resp := r.recv(r.join(joinReq("g", "", "", 5))); resp.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Errorf("a third member past group.max.size 2: %d", resp.ErrorCode)
	}
}

// TestSessionExpiry: a member that stops heartbeating is removed after
// its session timeout; the others rebalance without it.
func TestSessionExpiry(t *testing.T) {
	r := newRig(t)
	ids, gen := r.stable("g", 2)
	r.clk.add(6 * time.Second)
	if code := r.heartbeat("g", ids[0], gen); code != 0 {
		t.Fatal(code)
	}
	r.clk.add(5 * time.Second) // ids[1] last heard from 11 s ago: past its 10 s session
	r.c.tickAll(r.clk.Now())
	if code := r.heartbeat("g", ids[0], gen); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("after a member expired: heartbeat %d, state %s", code, r.state("g"))
	}
	resp := r.recv(r.join(joinReq("g", ids[0], "", 5)))
	if resp.Generation != gen+1 || len(resp.Members) != 1 || resp.LeaderID != ids[0] {
		t.Fatalf("rejoin after the expiry: %+v", resp)
	}
	if code := r.heartbeat("g", ids[1], gen); code != kerr.UnknownMemberID.Code {
		t.Errorf("the expired member's heartbeat: %d", code)
	}
}

// TestRebalanceTimeout: a member that does not rejoin within the
// rebalance timeout is removed and the join phase completes without it.
func TestRebalanceTimeout(t *testing.T) {
	r := newRig(t)
	ids, gen := r.stable("g", 2)
	ch := r.join(joinReq("g", ids[0], "", 5)) // the leader rejoins: a rebalance
	r.waitState("g", PreparingRebalance)
	r.keepAlive(29*time.Second, "g", gen, ids[1]) // alive, but not rejoining
	select {
	case <-ch:
		t.Fatal("the join phase completed before the rebalance timeout")
	case <-time.After(50 * time.Millisecond):
	}
	r.clk.add(2 * time.Second)
	r.c.tickAll(r.clk.Now())
	resp := r.recv(ch)
	if resp.Generation != gen+1 || len(resp.Members) != 1 {
		t.Fatalf("after the rebalance timeout: %+v", resp)
	}
}

// TestStaticMemberRejoins (KIP-345): a static member restarting (a join
// with its instance id and no member id) takes its old place without a
// rebalance, gets its assignment again, and its old member id is fenced.
func TestStaticMemberRejoins(t *testing.T) {
	r := newRig(t)
	a := r.join(joinReq("g", "", "pod-a", 5))
	b := r.join(joinReq("g", "", "pod-b", 5))
	r.joining("g", 2)
	ra, rb := r.recv(a), r.recv(b)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != rb.Generation {
		t.Fatalf("static joins: %+v %+v", ra, rb)
	}
	gen := ra.Generation
	leader, follower := ra, rb
	if rb.MemberID == rb.LeaderID {
		leader, follower = rb, ra
	}
	s1 := r.sync("g", follower.MemberID, gen, nil)
	s2 := r.sync("g", leader.MemberID, gen, map[string]string{leader.MemberID: "L", follower.MemberID: "F"})
	recvSync(t, s1)
	recvSync(t, s2)
	instance := "pod-a"
	if follower == rb {
		instance = "pod-b"
	}
	again := r.recv(r.join(joinReq("g", "", instance, 5)))
	if again.ErrorCode != 0 || again.Generation != gen || again.MemberID == follower.MemberID || r.state("g") != Stable {
		t.Fatalf("static rejoin: %+v, state %s", again, r.state("g"))
	}
	if resp := recvSync(t, r.sync("g", again.MemberID, gen, nil)); string(resp.MemberAssignment) != "F" {
		t.Fatalf("the rejoined static member's assignment %q, want F", resp.MemberAssignment)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "g", follower.MemberID, gen, &instance
	if code := r.c.Heartbeat(hb).ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Fatalf("the old member id's heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}
}

func commitReq(group, member string, gen int32, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Version, q.Group, q.MemberID, q.Generation = 8, group, member, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "orders"
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, 3
		t.Partitions = append(t.Partitions, rp)
	}
	q.Topics = append(q.Topics, t)
	return q
}

func allow(string, int32) int16 { return 0 }

func commitCodes(resp *kmsg.OffsetCommitResponse) []int16 {
	var out []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

func TestCommitRules(t *testing.T) {
	r := newRig(t)
	// A simple commit (generation -1, no member) makes an Empty group.
	if codes := commitCodes(r.c.Commit(commitReq("simple", "", -1, map[int32]int64{0: 5}), allow)); codes[0] != 0 {
		t.Fatalf("simple commit: %v", codes)
	}
	if offs, _ := r.c.Offsets("simple"); offs[remotelog.TopicPartition{Topic: "orders", Partition: 0}].Offset != 5 {
		t.Fatalf("offsets after a simple commit: %+v", offs)
	}
	ids, gen := r.stable("g", 2)
	for name, c := range map[string]struct {
		q    *kmsg.OffsetCommitRequest
		want *kerr.Error
	}{
		"simple commit to a group with members": {commitReq("g", "", -1, map[int32]int64{0: 1}), kerr.UnknownMemberID},
		"old generation":                        {commitReq("g", ids[0], gen-1, map[int32]int64{0: 1}), kerr.IllegalGeneration},
		"unknown member":                        {commitReq("g", "nobody", gen, map[int32]int64{0: 1}), kerr.UnknownMemberID},
		"group that does not exist":             {commitReq("none", "m", 3, map[int32]int64{0: 1}), kerr.IllegalGeneration},
	} {
		if codes := commitCodes(r.c.Commit(c.q, allow)); codes[0] != c.want.Code {
			t.Errorf("%s: %v, want %s", name, codes, c.want.Message)
		}
	}
	big := commitReq("g", ids[0], gen, map[int32]int64{0: 7})
	md := strings.Repeat("x", 4097)
	big.Topics[0].Partitions[0].Metadata = &md
	if codes := commitCodes(r.c.Commit(big, allow)); codes[0] != kerr.OffsetMetadataTooLarge.Code {
		t.Errorf("metadata of 4097 bytes: %v", codes)
	}
	denied := func(string, int32) int16 { return kerr.TopicAuthorizationFailed.Code }
	if codes := commitCodes(r.c.Commit(commitReq("g", ids[0], gen, map[int32]int64{1: 9}), denied)); codes[0] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("a topic the caller may not read: %v", codes)
	}
	if codes := commitCodes(r.c.Commit(commitReq("g", ids[0], gen, map[int32]int64{0: 7, 1: 8}), allow)); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("member commit: %v", codes)
	}
	offs, _ := r.c.Offsets("g")
	if o := offs[remotelog.TopicPartition{Topic: "orders", Partition: 1}]; o.Offset != 8 || o.LeaderEpoch != 3 {
		t.Fatalf("committed %+v", o)
	}
	// A store that takes no writes: nothing is kept, the client retries.
	r.store.Fail = errors.New("disk full")
	if codes := commitCodes(r.c.Commit(commitReq("g", ids[0], gen, map[int32]int64{0: 100}), allow)); codes[0] != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("commit to a failing store: %v", codes)
	}
	if offs, _ := r.c.Offsets("g"); offs[remotelog.TopicPartition{Topic: "orders", Partition: 0}].Offset != 7 {
		t.Errorf("a commit the store refused changed the offset: %+v", offs)
	}
	// During CompletingRebalance a commit waits for the assignment.
	r.store.Fail = nil
	ch := r.join(joinReq("g", ids[0], "", 5))
	r.waitState("g", PreparingRebalance)
	r.join(joinReq("g", ids[1], "", 5))
	resp := r.recv(ch)
	if codes := commitCodes(r.c.Commit(commitReq("g", ids[0], resp.Generation, map[int32]int64{0: 9}), allow)); codes[0] != kerr.RebalanceInProgress.Code {
		t.Errorf("commit before SyncGroup: %v (state %s)", codes, r.state("g"))
	}
}

// TestRestart: a coordinator over the same store comes back with the
// group Stable at its generation (members heartbeat on, no rebalance)
// and its offsets.
func TestRestart(t *testing.T) {
	r := newRig(t)
	ids, gen := r.stable("g", 2)
	r.c.Commit(commitReq("g", ids[1], gen, map[int32]int64{0: 42}), allow)
	r2 := newRigOn(t, r.store, r.clk)
	if r2.state("g") != Stable {
		t.Fatalf("after a restart: state %s", r2.state("g"))
	}
	for _, id := range ids {
		if code := r2.heartbeat("g", id, gen); code != 0 {
			t.Errorf("heartbeat of %s after a restart: %d", id, code)
		}
	}
	if resp := recvSync(t, r2.sync("g", ids[1], gen, nil)); string(resp.MemberAssignment) != "for-"+ids[1] {
		t.Errorf("assignment after a restart %q", resp.MemberAssignment)
	}
	if offs, _ := r2.c.Offsets("g"); offs[remotelog.TopicPartition{Topic: "orders", Partition: 0}].Offset != 42 {
		t.Errorf("offsets after a restart %+v", offs)
	}
	// Members that do not come back expire, and the group empties.
	r2.clk.add(11 * time.Second)
	r2.c.tickAll(r2.clk.Now())
	r2.c.tickAll(r2.clk.Now())
	if r2.state("g") != Empty {
		t.Fatalf("after the members' sessions: state %s", r2.state("g"))
	}
}

func TestLoadingAnswers(t *testing.T) {
	c, err := New(DefaultConfig(), groupstest.NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	if code := c.Heartbeat(kmsg.NewPtrHeartbeatRequest()).ErrorCode; code != kerr.InvalidGroupID.Code {
		t.Errorf("heartbeat without a group id while loading: %d", code)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g"
	if code := c.Heartbeat(hb).ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("heartbeat while loading: %d", code)
	}
	if _, code := c.Offsets("g"); code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("offsets while loading: %d", code)
	}
	if _, code := c.List(nil); code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("list while loading: %d", code)
	}
}

// TestExpireAndDelete: an empty group's offsets expire
// offsets.retention.minutes after it emptied, and the group goes; a
// group with members cannot be deleted, an empty one can; offsets of a
// topic the members subscribe to cannot be deleted.
func TestExpireAndDelete(t *testing.T) {
	r := newRig(t, func(c *Config) { c.OffsetsRetentionMinutes = 60 })
	r.c.Commit(commitReq("old", "", -1, map[int32]int64{0: 3}), allow)
	r.clk.add(59 * time.Minute)
	r.c.ExpireOffsets()
	if offs, _ := r.c.Offsets("old"); len(offs) != 1 {
		t.Fatalf("expired early: %+v", offs)
	}
	r.clk.add(2 * time.Minute)
	r.c.ExpireOffsets()
	if l, _ := r.c.List(nil); len(l) != 0 || len(r.store.Groups()) != 0 {
		t.Fatalf("after retention: groups %+v, kept %v", l, r.store.Groups())
	}
	ids, gen := r.stable("g", 1)
	r.c.Commit(commitReq("g", ids[0], gen, map[int32]int64{0: 1}), allow)
	other := kmsg.NewPtrOffsetCommitRequest()
	other.Version, other.Group, other.MemberID, other.Generation = 8, "g", ids[0], gen
	other.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "unsubscribed", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 4}}}}
	r.c.Commit(other, allow)
	if code := r.c.Delete("g"); code != kerr.NonEmptyGroup.Code {
		t.Errorf("deleting a group with members: %d", code)
	}
	if code := r.c.Delete("none"); code != kerr.GroupIDNotFound.Code {
		t.Errorf("deleting a group that does not exist: %d", code)
	}
	code, per := r.c.DeleteOffsets("g", []remotelog.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "unsubscribed", Partition: 0}})
	if code != 0 || per[remotelog.TopicPartition{Topic: "orders", Partition: 0}] != kerr.GroupSubscribedToTopic.Code ||
		per[remotelog.TopicPartition{Topic: "unsubscribed", Partition: 0}] != 0 {
		t.Fatalf("OffsetDelete: %d %v", code, per)
	}
	// In a live consumer group, only a topic nobody subscribes to expires.
	r.c.Commit(other, allow)
	r.c.Commit(commitReq("g", ids[0], gen, map[int32]int64{0: 1}), allow)
	r.keepAlive(61*time.Minute, "g", gen, ids[0])
	r.c.ExpireOffsets()
	offs, _ := r.c.Offsets("g")
	if _, ok := offs[remotelog.TopicPartition{Topic: "unsubscribed", Partition: 0}]; ok || len(offs) != 1 {
		t.Fatalf("expiry in a live group: %+v (state %s)", offs, r.state("g"))
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.Members = 3, "g", []kmsg.LeaveGroupRequestMember{{MemberID: ids[0]}}
	if resp := r.c.Leave(leave); resp.ErrorCode != 0 || resp.Members[0].ErrorCode != 0 || r.state("g") != Empty {
		t.Fatalf("leave: %+v, state %s", resp, r.state("g"))
	}
	if code := r.c.Delete("g"); code != 0 || len(r.store.Groups()) != 0 {
		t.Fatalf("deleting the empty group: %d, kept %v", code, r.store.Groups())
	}
}

// TestMetrics: the gauges follow the groups (state, members, lag against
// the high watermarks given) and the counters what happened to them.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	hw := func(_ context.Context, tp remotelog.TopicPartition) (int64, error) {
		if tp.Partition == 1 {
			return 0, errors.New("not served")
		}
		return 50, nil
	}
	r := newRig(t, func(*Config) {})
	c, err := New(r.c.cfg, r.store, withClock(r.clk.Now), WithRegisterer(reg), WithHighWatermarks(hw))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	r.c = c
	ids, gen := r.stable("g", 2)
	r.c.Commit(commitReq("g", ids[0], gen, map[int32]int64{0: 20, 1: 7}), allow)
	r.c.Commit(commitReq("simple", "", -1, map[int32]int64{0: 60}), allow)
	want := `
# HELP tierd_kafka_group_lag Records between a group's committed offset and the partition's high watermark.
# TYPE tierd_kafka_group_lag gauge
tierd_kafka_group_lag{group="g",partition="0",topic="orders"} 30
tierd_kafka_group_lag{group="simple",partition="0",topic="orders"} 0
# HELP tierd_kafka_group_members Members of each consumer group that has any.
# TYPE tierd_kafka_group_members gauge
tierd_kafka_group_members{group="g"} 2
# HELP tierd_kafka_groups Consumer groups kept, by state.
# TYPE tierd_kafka_groups gauge
tierd_kafka_groups{state="CompletingRebalance"} 0
tierd_kafka_groups{state="Empty"} 1
tierd_kafka_groups{state="PreparingRebalance"} 0
tierd_kafka_groups{state="Stable"} 1
# HELP tierd_kafka_group_offsets_committed_total Partitions' offsets committed to consumer groups, durably.
# TYPE tierd_kafka_group_offsets_committed_total counter
tierd_kafka_group_offsets_committed_total 3
# HELP tierd_kafka_group_rebalances_total Join phases of consumer groups completed with members (a new generation).
# TYPE tierd_kafka_group_rebalances_total counter
tierd_kafka_group_rebalances_total 1
`
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(want), "tierd_kafka_group_lag", "tierd_kafka_group_members", "tierd_kafka_groups",
		"tierd_kafka_group_offsets_committed_total", "tierd_kafka_group_rebalances_total"); err != nil {
		t.Fatal(err)
	}
	// One member leaves, the other's session expires.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.Members = 3, "g", []kmsg.LeaveGroupRequestMember{{MemberID: ids[1]}}
	r.c.Leave(leave)
	r.waitState("g", PreparingRebalance)
	r.keepAlive(31*time.Second, "g", gen, ids[0]) // alive, but not rejoining: removed at the rebalance timeout
	r.store.Fail = errors.New("disk full")
	r.c.Commit(commitReq("simple", "", -1, map[int32]int64{0: 61}), allow)
	for reason, n := range map[string]float64{"left": 1, "not_rejoined": 1, "session_expired": 0} {
		if got := promtestutil.ToFloat64(c.m.removed.WithLabelValues(reason)); got != n {
			t.Errorf("members removed for %s: %v, want %v", reason, got, n)
		}
	}
	if got := promtestutil.ToFloat64(c.m.commitFailures); got != 1 {
		t.Errorf("commit failures %v", got)
	}
	if r.state("g") != Empty {
		t.Errorf("state %s", r.state("g"))
	}
}

// TestStatus: Status gives each group's members with the partitions of
// their consumer assignment, and its committed offsets with their lag.
func TestStatus(t *testing.T) {
	r := newRig(t)
	c, err := New(r.c.cfg, r.store, withClock(r.clk.Now), WithHighWatermarks(func(_ context.Context, tp remotelog.TopicPartition) (int64, error) {
		if tp.Partition == 1 {
			return 0, errors.New("not served")
		}
		return 50, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	c.Load()
	r.c = c
	n := int32(0)
	r.assign = func(string) string {
		a := kmsg.NewConsumerMemberAssignment()
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "orders", Partitions: []int32{n + 1, n}}}
		n += 2
		return string(a.AppendTo(nil))
	}
	ids, gen := r.stable("g", 2)
	r.c.Commit(commitReq("g", ids[0], gen, map[int32]int64{1: 7, 0: 20}), allow)
	r.c.Commit(commitReq("simple", "", -1, map[int32]int64{0: 60}), allow)
	all := r.c.Status(context.Background(), "")
	if len(all) != 2 || all[0].Group != "g" || all[1].Group != "simple" || all[1].State != "Empty" {
		t.Fatalf("groups %+v", all)
	}
	g := all[0]
	if g.State != "Stable" || g.Generation != gen || g.Protocol != "range" || len(g.Members) != 2 {
		t.Fatalf("g: %+v", g)
	}
	var assigned []string
	for _, m := range g.Members {
		if len(m.Assigned) != 2 || m.Assigned[0].Partition+1 != m.Assigned[1].Partition {
			t.Errorf("member %s assigned %v, want two partitions in order", m.MemberID, m.Assigned)
		}
		for _, tp := range m.Assigned {
			assigned = append(assigned, tp.String())
		}
	}
	if len(assigned) != 4 {
		t.Errorf("assigned %v", assigned)
	}
	want := []remotelog.GroupOffsetStatus{
		{TopicPartition: remotelog.TopicPartition{Topic: "orders", Partition: 0}, Committed: 20, HighWatermark: 50, Lag: 30},
		{TopicPartition: remotelog.TopicPartition{Topic: "orders", Partition: 1}, Committed: 7, HighWatermark: -1, Lag: -1},
	}
	if fmt.Sprint(g.Offsets) != fmt.Sprint(want) {
		t.Errorf("offsets %+v, want %+v", g.Offsets, want)
	}
	if one := r.c.Status(context.Background(), "simple"); len(one) != 1 || one[0].Offsets[0].Lag != 0 {
		t.Errorf("one group: %+v", one)
	}
}

// TestSessionExpiresDuringRebalance: a member that dies while the group
// rebalances (it neither rejoins nor heartbeats) is removed at its
// session timeout, and the join phase then completes without waiting for
// the rebalance timeout.
func TestSessionExpiresDuringRebalance(t *testing.T) {
	r := newRig(t)
	ids, gen := r.stable("g", 2)
	ch := r.join(joinReq("g", ids[0], "", 5)) // the leader rejoins; ids[1] is dead
	r.waitState("g", PreparingRebalance)
	r.clk.add(11 * time.Second) // past ids[1]'s 10 s session, well before the 30 s rebalance timeout
	r.c.tickAll(r.clk.Now())
	resp := r.recv(ch)
	if resp.Generation != gen+1 || len(resp.Members) != 1 || resp.LeaderID != ids[0] {
		t.Fatalf("after the dead member's session: %+v", resp)
	}
}

// TestManyProtocols: a JoinGroup listing many protocols costs time
// linear in them, not quadratic, under the coordinator's lock (a
// heartbeat of another group is answered meanwhile).
func TestManyProtocols(t *testing.T) {
	r := newRig(t, func(c *Config) { c.InitialRebalanceDelayMs = 0 })
	big := func(prefix string) *kmsg.JoinGroupRequest {
		q := joinReq("many", "", "", 3)
		q.Protocols = nil
		for i := 0; i < 60000; i++ {
			q.Protocols = append(q.Protocols, kmsg.JoinGroupRequestProtocol{Name: fmt.Sprintf("%s%07d", prefix, i)})
		}
		return q
	}
	r.recv(r.join(big("a")))
	other := big("b")
	other.Protocols = append(other.Protocols, kmsg.JoinGroupRequestProtocol{Name: "a0000000"})
	start := time.Now()
	ch := r.join(other)
	r.waitState("many", PreparingRebalance)
	if d := time.Since(start); d > 20*time.Second { // a guard against the quadratic case (minutes under -race), not a timing goal
		t.Fatalf("a join of 60000 protocols took %v", d)
	}
	_ = ch
}

// TestRefusals: a JoinGroup the same member sends again while the first
// waits answers the first (REBALANCE_IN_PROGRESS) rather than leaving it
// waiting; a group id past MaxGroupIDBytes is INVALID_GROUP_ID; a simple
// commit refused for every partition leaves no group; a static member
// whose new id the store did not take keeps its old id and place.
func TestRefusals(t *testing.T) {
	r := newRig(t)
	ids, _ := r.stable("g", 2)
	first := r.join(joinReq("g", ids[0], "", 5))
	r.waitState("g", PreparingRebalance)
	second := r.join(joinReq("g", ids[0], "", 5))
	if resp := r.recv(first); resp.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Errorf("the superseded JoinGroup: %+v", resp)
	}
	r.join(joinReq("g", ids[1], "", 5))
	if resp := r.recv(second); resp.ErrorCode != 0 {
		t.Errorf("the JoinGroup that superseded it: %+v", resp)
	}

	long := strings.Repeat("x", MaxGroupIDBytes+1)
	if resp := r.recv(r.join(joinReq(long, "", "", 5))); resp.ErrorCode != kerr.InvalidGroupID.Code {
		t.Errorf("a group id of %d bytes: %d", len(long), resp.ErrorCode)
	}
	deny := func(string, int32) int16 { return kerr.UnknownTopicOrPartition.Code }
	r.c.Commit(commitReq("junk", "", -1, map[int32]int64{0: 1}), deny)
	if st := r.c.Status(context.Background(), "junk"); len(st) != 0 {
		t.Errorf("a refused commit left a group: %+v", st)
	}

	a := r.join(joinReq("s", "", "pod-a", 5))
	r.joining("s", 1)
	ra := r.recv(a)
	recvSync(t, r.sync("s", ra.MemberID, ra.Generation, map[string]string{ra.MemberID: "A"}))
	r.store.Fail = errors.New("disk full")
	if resp := r.recv(r.join(joinReq("s", "", "pod-a", 5))); resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("a static rejoin the store refused: %+v", resp)
	}
	r.store.Fail = nil
	hb := kmsg.NewPtrHeartbeatRequest()
	pod := "pod-a"
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "s", ra.MemberID, ra.Generation, &pod
	if code := r.c.Heartbeat(hb).ErrorCode; code != 0 {
		t.Errorf("the old member id after the refused rejoin: %d, want it still the member", code)
	}
	if st := r.c.Status(context.Background(), "s"); len(st) != 1 || len(st[0].Members) != 1 || st[0].Members[0].MemberID != ra.MemberID {
		t.Errorf("members after the refused rejoin: %+v", st)
	}
}

// TestMaxSizeCountsMembers: group.max.size counts members (in a join
// phase, those waiting in it), as Kafka's acceptJoiningMember does, not
// the member ids handed out and not used (KIP-394).
func TestMaxSizeCountsMembers(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxSize = 2 })
	r.stable("g", 1)
	var pending []string
	for i := 0; i < 3; i++ { // three ids handed out: the group has one member
		resp := r.recv(r.join(joinReq("g", "", "", 5)))
		if resp.ErrorCode != kerr.MemberIDRequired.Code {
			t.Fatalf("new member %d: %d", i, resp.ErrorCode)
		}
		pending = append(pending, resp.MemberID)
	}
	r.join(joinReq("g", pending[0], "", 5))
	r.waitState("g", PreparingRebalance)
	r.join(joinReq("g", pending[1], "", 5))
	r.waitFor("two waiting", func() bool { return len(r.c.Describe("g").Members) == 3 })
	if resp := r.recv(r.join(joinReq("g", pending[2], "", 5))); resp.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("a third waiting member past group.max.size 2: %d", resp.ErrorCode)
	}
}
