package listener

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// hugeLog holds topic "huge": partition 0 three batches of 600 KiB (more
// than half of a 1 MiB fetch.response.memory.bytes), partition 1 two
// batches of 1.5 MiB (more than all of it), partition 2 twenty batches of
// 1 KiB. It returns the records per partition.
func hugeLog(t testing.TB) (*fakeLog, map[TopicPartition]int) {
	l := newFakeLog()
	want := map[TopicPartition]int{}
	add := func(p int32, n, size int) {
		for o := 0; o < n; o++ {
			l.appendRaw(t, "huge", p, v2(t, batch.NewParams(int64(o), 0), rec(fmt.Sprint(o), strings.Repeat("v", size), int64(o))))
		}
		want[TopicPartition{"huge", p}] = n
	}
	add(0, 3, 600<<10)
	add(1, 2, 1536<<10)
	add(2, 20, 1<<10)
	return l, want
}

// TestFetchMemoryManyConsumers: twenty franz-go consumers at once against
// a 1 MiB fetch.response.memory.bytes, every batch of two partitions
// larger than a Fetch's share: each reads every record, in order, and the
// memory is all given back.
func TestFetchMemoryManyConsumers(t *testing.T) {
	l, want := hugeLog(t)
	ts := startServer(t, l, func(c *Config) { c.FetchResponseMemoryBytes = 1 << 20 })
	const consumers = 20
	errs := make(chan error, consumers)
	var wg sync.WaitGroup
	for i := 0; i < consumers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- consumeAllErr(ts.addr, want)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	waitFor(t, "the memory given back", func() bool { return testutil.ToFloat64(ts.srv.m.fetchMem) == 0 })
	if !ts.srv.fetchMem.TryAcquire(1 << 20) {
		t.Fatal("the budget is not whole after the consumers closed")
	}
	ts.srv.fetchMem.Release(1 << 20)
	t.Logf("granted %v denied %v", testutil.ToFloat64(ts.srv.m.fetchMemWaits.WithLabelValues("granted")),
		testutil.ToFloat64(ts.srv.m.fetchMemWaits.WithLabelValues("denied")))
}

// consumeAllErr is consumeAll for goroutines: it checks offsets are
// consecutive and returns an error instead of failing the test.
func consumeAllErr(addr string, want map[TopicPartition]int) error {
	parts := map[string]map[int32]kgo.Offset{}
	for tp := range want {
		if parts[tp.Topic] == nil {
			parts[tp.Topic] = map[int32]kgo.Offset{}
		}
		parts[tp.Topic][tp.Partition] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(parts), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	got := map[TopicPartition]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for {
		done := true
		for tp, n := range want {
			if got[tp] < n {
				done = false
			}
		}
		if done {
			return nil
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("gave up consuming with %v of %v", got, want)
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("fetch error %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			tp := TopicPartition{r.Topic, r.Partition}
			if r.Offset != int64(got[tp]) || string(r.Key) != fmt.Sprint(r.Offset) {
				bad = fmt.Errorf("%s: offset %d key %q, want offset %d", tp, r.Offset, r.Key, got[tp])
			}
			got[tp]++
		})
		if bad != nil {
			return bad
		}
	}
}
