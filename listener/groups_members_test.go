package listener

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/listener/groups/groupstest"
)

// TestGroupMemberKilled: a kcat -G process killed with SIGKILL (no
// LeaveGroup) keeps its partitions only until its session.timeout.ms
// passes; then the group's other member, a franz-go consumer, gets every
// partition and reads what is appended after the kill.
func TestGroupMemberKilled(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	ts, _ := groupServer(t, 4, 10, groupstest.NewMemStore())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newPlainClient(t, ts.addr))
	members := func() (n int, partitions map[string]int) {
		d, err := adm.DescribeGroups(ctx, "killed")
		if err != nil {
			return 0, nil
		}
		g := d["killed"]
		if g.State != "Stable" {
			return 0, nil
		}
		partitions = map[string]int{}
		for _, m := range g.Members {
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range c.Topics {
					partitions[m.ClientID] += len(tp.Partitions)
				}
			}
		}
		return len(g.Members), partitions
	}

	// kcat first, alone: it has every partition, reads them to the end
	// (committing on revoke), and would go on.
	cmd := exec.Command(kcat, "-b", ts.addr, "-G", "killed", "orders", "-f", "%p:%o\n", "-X", "client.id=kcat-member",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-X", "enable.auto.commit=false",
		"-X", "partition.assignment.strategy=range")
	var kerr lockedBuf
	cmd.Stderr = &kerr
	defer func() {
		if t.Failed() {
			t.Log("kcat's stderr:\n" + kerr.String())
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	testtools.WaitFor(t, "kcat in the group", func() bool { n, p := members(); return n == 1 && p["kcat-member"] == 4 })

	cl := groupConsumer(t, ts.addr, "killed", kgo.Balancers(kgo.RangeBalancer()), kgo.ClientID("franz-member"))
	defer cl.Close()
	read := map[string]bool{} // partition/value read by franz-go
	poll := func(until func() bool) {
		for !until() {
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			if ctx.Err() != nil {
				t.Fatalf("timed out; franz-go read %d records, group %v", len(read), describeForTest(t, ts.addr, "killed"))
			}
			fs.EachRecord(func(r *kgo.Record) { read[fmt.Sprintf("%d/%s", r.Partition, r.Value)] = true })
		}
	}
	poll(func() bool { n, p := members(); return n == 2 && p["kcat-member"] == 2 && p["franz-member"] == 2 })

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	poll(func() bool { n, p := members(); return n == 1 && p["franz-member"] == 4 })
	// What comes now in every partition is read once, by franz-go: the
	// killed member's partitions moved.
	for p := int32(0); p < 4; p++ {
		ts.log.appendRaw(t, "orders", p, v2(t, batch.NewParams(10, 0), rec("late", fmt.Sprintf("after-kill-%d", p), 9000)))
	}
	poll(func() bool {
		n := 0
		for k := range read {
			if strings.Contains(k, "after-kill") {
				n++
			}
		}
		return n == 4
	})
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// saramaHandler collects what a sarama group member reads and marks it
// consumed.
type saramaHandler struct {
	mu   sync.Mutex
	read map[string]int // partition/offset -> times read
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.read[fmt.Sprintf("%d/%d", m.Partition, m.Offset)]++
		h.mu.Unlock()
		s.MarkMessage(m, "")
	}
	return nil
}

func (h *saramaHandler) count() (n int, twice bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.read {
		twice = twice || c > 1
	}
	return len(h.read), twice
}

// TestSaramaGroup: two sarama ConsumerGroup members share the partitions
// of a group, read every record once between them, and their commits
// (sarama's auto-commit of marked offsets) are the group's offsets.
func TestSaramaGroup(t *testing.T) {
	t.Parallel()
	ts, _ := groupServer(t, 4, 25, groupstest.NewMemStore())
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	h := &saramaHandler{read: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var groups []sarama.ConsumerGroup
	for i := 0; i < 2; i++ {
		g, err := sarama.NewConsumerGroup([]string{ts.addr}, "sarama-group", cfg)
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{"orders"}, h); err != nil && ctx.Err() == nil {
					t.Errorf("sarama Consume: %v", err)
					return
				}
			}
		}()
	}
	testtools.WaitFor(t, "both members in the group", func() bool {
		return strings.Contains(describeForTest(t, ts.addr, "sarama-group"), "state Stable protocol range members 2")
	})
	testtools.WaitFor(t, "100 records read", func() bool { n, _ := h.count(); return n == 100 })
	testtools.WaitFor(t, "the commits", func() bool { return allAt(committed(t, ts.addr, "sarama-group", 4), 25) })
	cancel()
	wg.Wait()
	for _, g := range groups {
		g.Close()
	}
	if _, twice := h.count(); twice {
		t.Errorf("a record was read twice: %v", h.read)
	}
}

// TestKIP848ClientFallsBack: ConsumerGroupHeartbeat (KIP-848) is not
// advertised, so a franz-go consumer that asks for server-side
// assignment (kgo.ServerSideBalancer) joins with the classic protocol,
// is assigned its partitions and reads.
func TestKIP848ClientFallsBack(t *testing.T) {
	t.Parallel()
	ts, _ := groupServer(t, 2, 5, groupstest.NewMemStore())
	av := dialRaw(t, ts.addr, "versions").roundTrip(apiVersions(3)).(*kmsg.ApiVersionsResponse)
	for _, k := range av.ApiKeys {
		if k.ApiKey == int16(kmsg.ConsumerGroupHeartbeat) || k.ApiKey == int16(kmsg.ConsumerGroupDescribe) {
			t.Fatalf("%s advertised", kmsg.NameForKey(k.ApiKey))
		}
	}
	cl := groupConsumer(t, ts.addr, "next-gen", kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := 0; n < 10; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 10 records: %v", n, fs.Errors())
		}
		n += fs.NumRecords()
	}
	if d := describeForTest(t, ts.addr, "next-gen"); !strings.Contains(d, "protocol range members 1") {
		t.Fatalf("not a classic group with the client as its member: %s", d)
	}
}

// TestStaticMemberRestarts (KIP-345): a franz-go static member
// (kgo.InstanceID) that restarts within its session timeout takes its
// old place: the group keeps its generation, no rebalance, and the
// restarted member gets the partitions it had.
func TestStaticMemberRestarts(t *testing.T) {
	t.Parallel()
	ts, coord := groupServer(t, 4, 5, groupstest.NewMemStore())
	static := func(id string) *kgo.Client {
		cl := groupConsumer(t, ts.addr, "static", kgo.InstanceID(id), kgo.Balancers(kgo.RangeBalancer()))
		go func() {
			for !cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
		return cl
	}
	a, b := static("pod-a"), static("pod-b")
	defer b.Close()
	type seen struct {
		gen      int32
		memberOf map[string]string // instance id -> member id
		parts    map[string]string // instance id -> partitions
	}
	look := func() (seen, bool) {
		st := coord.Status(context.Background(), "static")
		if len(st) != 1 || st[0].State != "Stable" || len(st[0].Members) != 2 {
			return seen{}, false
		}
		s := seen{gen: st[0].Generation, memberOf: map[string]string{}, parts: map[string]string{}}
		for _, m := range st[0].Members {
			s.memberOf[m.InstanceID], s.parts[m.InstanceID] = m.MemberID, fmt.Sprint(m.Assigned)
		}
		return s, len(s.parts["pod-a"]) > 2 && len(s.parts["pod-b"]) > 2
	}
	var before seen
	testtools.WaitFor(t, "both static members assigned", func() bool { var ok bool; before, ok = look(); return ok })
	a.Close() // a static member does not leave the group on close
	a = static("pod-a")
	defer a.Close()
	var after seen
	testtools.WaitFor(t, "pod-a back", func() bool {
		var ok bool
		after, ok = look()
		return ok && after.memberOf["pod-a"] != before.memberOf["pod-a"]
	})
	if after.gen != before.gen || after.parts["pod-a"] != before.parts["pod-a"] || after.memberOf["pod-b"] != before.memberOf["pod-b"] {
		t.Fatalf("the restart rebalanced: before %+v, after %+v", before, after)
	}
}
