package listener

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/listener/groups"
	"github.com/tierd/tierd/listener/groups/groupstest"
)

// TestGroupSoak: 50 groups of 4 franz-go members each, one member
// replaced every 100 ms (it leaves, a new one joins), for
// TIERD_GROUP_SOAK (a duration; default 10s). Every group stays served
// (each ends Stable with 4 members), the heap after the churn stays
// within 64 MiB of the heap before it, and once every client is gone
// every group is Empty and the goroutines are back to what they were.
// The CPU the churn cost (this process: the clients and the listener) is
// logged in seconds per second of churn, not asserted. make test runs
// 10 s; TIERD_GROUP_SOAK=3m is the longer soak.
func TestGroupSoak(t *testing.T) {
	d := 10 * time.Second
	if v := os.Getenv("TIERD_GROUP_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("TIERD_GROUP_SOAK: %v", err)
		}
	}
	const nGroups, perGroup = 50, 4
	baseGoroutines := runtime.NumGoroutine()
	ts, coord := groupServer(t, 8, 10, groupstest.NewMemStore())
	member := func(g int) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.ConsumerGroup(fmt.Sprintf("soak-%02d", g)), kgo.ConsumeTopics("orders"),
			kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second), kgo.FetchMaxWait(time.Second),
			kgo.AutoCommitInterval(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		go func() { // drain: a poller that stops when the client closes
			for {
				if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
					return
				}
			}
		}()
		return cl
	}
	members := make([][]*kgo.Client, nGroups)
	for g := range members {
		for i := 0; i < perGroup; i++ {
			members[g] = append(members[g], member(g))
		}
	}
	settled := func() bool {
		for _, s := range coord.Status(context.Background(), "") {
			if s.State != string(groups.Stable) || len(s.Members) != perGroup {
				return false
			}
		}
		return len(coord.Status(context.Background(), "")) == nGroups
	}
	waitFor(t, "every group Stable with its members", settled)
	heapBefore := heapInUse()
	cpuBefore := cpuSeconds()
	replaced := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		g, i := rand.IntN(nGroups), rand.IntN(perGroup)
		members[g][i].Close() // leaves the group
		members[g][i] = member(g)
		replaced++
	}
	cpu := cpuSeconds() - cpuBefore
	waitFor(t, "every group Stable with its members after the churn", settled)
	heapAfter := heapInUse()
	t.Logf("%d members replaced in %v: %.2f CPU-seconds per second of churn (clients and listener), heap %d -> %d MiB",
		replaced, d, cpu/d.Seconds(), heapBefore>>20, heapAfter>>20)
	if heapAfter > heapBefore+64<<20 {
		t.Errorf("heap grew from %d to %d MiB over the churn", heapBefore>>20, heapAfter>>20)
	}
	for _, ms := range members {
		for _, cl := range ms {
			cl.Close()
		}
	}
	waitFor(t, "every group Empty", func() bool {
		for _, s := range coord.Status(context.Background(), "") {
			if s.State != string(groups.Empty) {
				return false
			}
		}
		return true
	})
	waitFor(t, "the goroutines back", func() bool { return runtime.NumGoroutine() <= baseGoroutines+20 })
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// cpuSeconds is the CPU this process used so far (user and system).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
