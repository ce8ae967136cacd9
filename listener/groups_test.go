package listener

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/listener/groups"
	"github.com/tierd/tierd/listener/groups/groupstest"
)

// groupServer serves a fake log of topic "orders" (parts partitions of n
// records each) with a group coordinator over store.
func groupServer(t *testing.T, parts int32, n int, store groups.Store, opts ...Option) (*testServer, *groups.Coordinator) {
	t.Helper()
	l := newFakeLog()
	for p := int32(0); p < parts; p++ {
		for i := 0; i < n; i++ {
			l.appendRaw(t, "orders", p, v2(t, batch.NewParams(int64(i), 0), rec(fmt.Sprintf("k%d", i), fmt.Sprintf("p%d-v%d", p, i), 1000+int64(i))))
		}
	}
	gc := groups.DefaultConfig()
	gc.InitialRebalanceDelayMs = 100
	gc.MinSessionTimeoutMs = 1000
	coord, err := groups.New(gc, store, groups.WithLogger(slog.New(slog.NewTextHandler(testLogWriter{t}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- coord.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator Run: %v", err)
		}
	})
	return startServer(t, l, nil, append([]Option{WithGroups(coord)}, opts...)...), coord
}

// testLogWriter writes to the test's log (shown when it fails).
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// groupConsumer is a franz-go consumer in group, reading orders.
func groupConsumer(t *testing.T, addr, group string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.DisableAutoCommit()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestGroupConsumerReadsAndCommits: one franz-go group consumer finds
// tierd as its coordinator, is assigned every partition, reads every
// record, commits, and the committed offsets are what OffsetFetch (kadm)
// gives; a second consumer of the group after it resumes from them.
func TestGroupConsumerReadsAndCommits(t *testing.T) {
	store := groupstest.NewMemStore()
	ts, _ := groupServer(t, 3, 20, store)
	cl := groupConsumer(t, ts.addr, "g1")
	got := map[int32]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for total := 0; total < 60; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 60 records: %v", total, fs.Errors())
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition]++; total++ })
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close() // leaves the group
	adm := kadm.NewClient(newPlainClient(t, ts.addr))
	offs, err := adm.FetchOffsets(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if o, ok := offs.Lookup("orders", p); !ok || o.At != 20 || o.Err != nil {
			t.Errorf("committed offset of orders-%d: %+v %v", p, o, ok)
		}
	}
	described, err := adm.DescribeGroups(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["g1"]; d.State != "Empty" || d.ProtocolType != "consumer" {
		t.Errorf("described after the member left: %+v", d)
	}
	// A new consumer of g1 starts at the committed offsets: nothing to read.
	l := ts.log
	l.appendRaw(t, "orders", 1, v2(t, batch.NewParams(20, 0), rec("late", "after-commit", 5000)))
	cl2 := groupConsumer(t, ts.addr, "g1")
	defer cl2.Close()
	fs := cl2.PollFetches(ctx)
	var recs []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	if len(recs) != 1 || string(recs[0].Value) != "after-commit" || recs[0].Offset != 20 {
		t.Fatalf("after the commit, the group read %d records (first %v), want only offset 20", len(recs), recs)
	}
}

// TestGroupSpreadsPartitions: three consumers of one group share six
// partitions; each record is read once.
func TestGroupSpreadsPartitions(t *testing.T) {
	ts, _ := groupServer(t, 6, 10, groupstest.NewMemStore())
	var mu sync.Mutex
	seen := map[string]int{}
	byMember := map[int]map[int32]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var clients []*kgo.Client
	for i := 0; i < 3; i++ {
		clients = append(clients, groupConsumer(t, ts.addr, "spread"))
		byMember[i] = map[int32]bool{}
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	// Wait until the group is Stable with three members (franz-go joins
	// in the background), then read.
	adm := kadm.NewClient(newPlainClient(t, ts.addr))
	waitFor(t, "three members, stable", func() bool {
		d, err := adm.DescribeGroups(ctx, "spread")
		return err == nil && d["spread"].State == "Stable" && len(d["spread"].Members) == 3
	})
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n >= 60 {
					return
				}
				fs := cl.PollFetches(pollCtx(ctx, 300*time.Millisecond))
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
					byMember[i][r.Partition] = true
					mu.Unlock()
				})
			}
		}()
	}
	wg.Wait()
	if len(seen) != 60 {
		t.Fatalf("read %d distinct records of 60; %s", len(seen), describeForTest(t, ts.addr, "spread"))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("record %s read %d times", k, n)
		}
	}
	owner := map[int32]int{}
	for i, ps := range byMember {
		if len(ps) == 0 {
			t.Errorf("member %d was given no partition", i)
		}
		for p := range ps {
			if o, ok := owner[p]; ok {
				t.Errorf("partition %d read by members %d and %d", p, o, i)
			}
			owner[p] = i
		}
	}
}

func pollCtx(parent context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(parent, d)
	go func() { <-ctx.Done(); cancel() }()
	return ctx
}

func newPlainClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func describeForTest(t *testing.T, addr, group string) string {
	adm := kadm.NewClient(newPlainClient(t, addr))
	d, err := adm.DescribeGroups(context.Background(), group)
	if err != nil {
		return err.Error()
	}
	g := d[group]
	s := fmt.Sprintf("state %s protocol %s members %d:", g.State, g.Protocol, len(g.Members))
	for _, m := range g.Members {
		a, _ := m.Assigned.AsConsumer()
		s += fmt.Sprintf(" %s=%v", m.MemberID, a)
	}
	return s
}
