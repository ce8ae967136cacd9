package listener

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// consumeAll reads with a franz-go assign-style consumer (no group) from
// the start of each partition until it has want[tp] records, and returns
// them by partition.
func consumeAll(t *testing.T, addr string, want map[TopicPartition]int, opts ...kgo.Opt) map[TopicPartition][]*kgo.Record {
	t.Helper()
	parts := map[string]map[int32]kgo.Offset{}
	for tp := range want {
		if parts[tp.Topic] == nil {
			parts[tp.Topic] = map[int32]kgo.Offset{}
		}
		parts[tp.Topic][tp.Partition] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumePartitions(parts),
		kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[TopicPartition][]*kgo.Record{}
	done := func() bool {
		for tp, n := range want {
			if len(got[tp]) < n {
				return false
			}
		}
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			for tp, n := range want {
				if len(got[tp]) < n {
					t.Errorf("%s: %d of %d records", tp, len(got[tp]), n)
				}
			}
			t.Fatalf("gave up consuming: %v", fs.Errors())
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch error %s-%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := TopicPartition{r.Topic, r.Partition}
			got[tp] = append(got[tp], r)
		})
	}
	return got
}

// sameRecord compares a consumed record with the record as stored.
func sameRecord(r *kgo.Record, w batch.Record) error {
	if r.Offset != w.Offset || !sameBytes(r.Key, w.Key) || !sameBytes(r.Value, w.Value) || r.Timestamp.UnixMilli() != w.Timestamp {
		return fmt.Errorf("got offset %d key %q value %q ts %d, want offset %d key %q value %q ts %d",
			r.Offset, r.Key, r.Value, r.Timestamp.UnixMilli(), w.Offset, w.Key, w.Value, w.Timestamp)
	}
	if len(r.Headers) != len(w.Headers) {
		return fmt.Errorf("offset %d: %d headers, want %d", r.Offset, len(r.Headers), len(w.Headers))
	}
	for i, h := range w.Headers {
		if r.Headers[i].Key != h.Key || !sameBytes(r.Headers[i].Value, h.Value) {
			return fmt.Errorf("offset %d header %d: %q=%q, want %q=%q", r.Offset, i, r.Headers[i].Key, r.Headers[i].Value, h.Key, h.Value)
		}
	}
	return nil
}

// TestKgoReadsFixtures: franz-go reads every record of every real fixture
// partition through the listener (magic 1 and 2, mixed logs, gzip,
// control batches, compacted gaps, empty logs), exactly as stored.
func TestKgoReadsFixtures(t *testing.T) {
	t.Parallel()
	l := newFakeLog()
	fixtures := loadFixtures(t, l)
	ts := startServer(t, l, nil)
	want := map[TopicPartition]int{}
	records := 0
	for _, f := range fixtures {
		want[f.tp] = len(f.want)
		records += len(f.want)
	}
	got := consumeAll(t, ts.addr, want)
	for _, f := range fixtures {
		g := got[f.tp]
		if len(g) != len(f.want) {
			t.Fatalf("%s: %d records, want %d", f.tp, len(g), len(f.want))
		}
		for i := range g {
			if err := sameRecord(g[i], f.want[i]); err != nil {
				t.Fatalf("%s (%s): %v", f.tp, f.path, err)
			}
		}
	}
	t.Logf("%d partitions, %d records read", len(fixtures), records)
	// Empty logs end where they start.
	adm := kadm.NewClient(newKgo(t, ts.addr))
	for _, f := range fixtures {
		if len(f.want) > 0 {
			continue
		}
		// A topic with a hole in its numbering fails for the hole
		// (LEADER_NOT_AVAILABLE) and answers for the held partitions.
		ends, err := adm.ListEndOffsets(context.Background(), f.tp.Topic)
		if o, ok := ends.Lookup(f.tp.Topic, f.tp.Partition); !ok || o.Err != nil || o.Offset != 0 {
			t.Fatalf("%s: end offset %+v (%v)", f.tp, o, err)
		}
	}
}

func newKgo(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// txnLog holds topic "txn" partition 0:
//
//	0-1   plain records
//	2-3   producer 10, transactional, aborted by the marker at 6
//	4-5   producer 11, transactional, committed by the marker at 7
//	6     ABORT marker (producer 10)
//	7     COMMIT marker (producer 11)
//	8     plain record
//	9-10  producer 12, transaction still open: the last stable offset is 9
func txnLog(t testing.TB) *fakeLog {
	l := newFakeLog()
	add := func(b []byte) { l.appendRaw(t, "txn", 0, b) }
	add(v2(t, batch.NewParams(0, 1), rec("a", "0", 100), rec("a", "1", 101)))
	add(v2(t, txnParams(2, 1, 10), rec("b", "2-aborted", 102), rec("b", "3-aborted", 103)))
	add(v2(t, txnParams(4, 1, 11), rec("c", "4-committed", 104), rec("c", "5-committed", 105)))
	add(marker(t, 6, 1, 10, false, 106))
	add(marker(t, 7, 1, 11, true, 107))
	add(v2(t, batch.NewParams(8, 1), rec("d", "8", 108)))
	add(v2(t, txnParams(9, 1, 12), rec("e", "9-open", 109), rec("e", "10-open", 110)))
	l.set("txn", 0, func(p *fakePart) {
		p.aborted = []fakeAborted{{pid: 10, first: 2, last: 6}}
		p.lso = 9
		p.epochs = []EpochEntry{{1, 0}}
	})
	return l
}

// TestKgoReadCommitted: read_committed gives the committed and plain
// records below the last stable offset; read_uncommitted gives every data
// record.
func TestKgoReadCommitted(t *testing.T) {
	t.Parallel()
	ts := startServer(t, txnLog(t), nil)
	tp := TopicPartition{"txn", 0}
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		want []int64
	}{
		{"read_committed", []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}, []int64{0, 1, 4, 5, 8}},
		{"read_uncommitted", nil, []int64{0, 1, 2, 3, 4, 5, 8, 9, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := consumeAll(t, ts.addr, map[TopicPartition]int{tp: len(tc.want)}, tc.opts...)[tp]
			for i, r := range got {
				if r.Offset != tc.want[i] {
					var offs []int64
					for _, r := range got {
						offs = append(offs, r.Offset)
					}
					t.Fatalf("offsets %v, want %v", offs, tc.want)
				}
			}
		})
	}
	adm := kadm.NewClient(newKgo(t, ts.addr))
	ends, err := adm.ListCommittedOffsets(context.Background(), "txn")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("txn", 0); o.Offset != 9 {
		t.Fatalf("read_committed end offset %d, want the last stable offset 9", o.Offset)
	}
}

// TestKgoLongPoll: a consumer at the end of the log receives a record
// appended while it waits.
func TestKgoLongPoll(t *testing.T) {
	t.Parallel()
	l := smallLog(t)
	ts := startServer(t, l, nil)
	cl := newKgo(t, ts.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtEnd()}}),
		kgo.FetchMaxWait(5*time.Second))
	fetches := func() float64 {
		n := 0.0
		for v := 4; v <= 16; v++ {
			n += counterValue(ts, "Fetch", v)
		}
		return n
	}
	type result struct {
		recs []*kgo.Record
		err  error
	}
	res := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				res <- result{err: err}
				return
			}
			if recs := fs.Records(); len(recs) > 0 {
				res <- result{recs: recs}
				return
			}
		}
	}()
	// The first fetch at the end is answered empty after max_wait; the
	// record goes in while the consumer is polling.
	waitFor(t, "a fetch", func() bool { return fetches() >= 1 })
	l.appendRaw(t, "t", 0, v2(t, batch.NewParams(6, 3), rec("late", "arrival", 2000)))
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.recs) != 1 || r.recs[0].Offset != 6 || string(r.recs[0].Value) != "arrival" {
		t.Fatalf("got %v", r.recs)
	}
}

// TestKgoProduceFails: a producer gets TOPIC_AUTHORIZATION_FAILED at once
// (no retries), and nothing is written.
func TestKgoProduceFails(t *testing.T) {
	t.Parallel()
	l := smallLog(t)
	ts := startServer(t, l, nil)
	for _, opts := range [][]kgo.Opt{nil, {kgo.DisableIdempotentWrite()}} {
		cl := newKgo(t, ts.addr, opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr()
		cancel()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("produce (%d opts): %v, want TOPIC_AUTHORIZATION_FAILED", len(opts), err)
		}
	}
	if n := len(l.topics["t"].parts[0].entries); n != 3 {
		t.Fatalf("%d entries after producing, want 3", n)
	}
}

// TestKgoStorageErrors: a partition whose storage is unavailable is
// retried by the consumer without surfacing an error, and read once it
// recovers; data loss is reported to the application.
func TestKgoStorageErrors(t *testing.T) {
	t.Parallel()
	l := smallLog(t)
	l.set("t", 0, func(p *fakePart) { p.err = fmt.Errorf("bucket timeout: %w", ErrUnavailable) })
	ts := startServer(t, l, nil)
	cl := newKgo(t, ts.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	storageErrs := func(code string) float64 {
		return counterErr(ts, "Fetch", code) + counterErr(ts, "ListOffsets", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recovered := make(chan struct{})
	go func() { // the storage comes back after the client met it failing twice
		defer close(recovered)
		for storageErrs("KAFKA_STORAGE_ERROR") < 2 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		l.set("t", 0, func(p *fakePart) { p.err = nil })
	}()
	var got []*kgo.Record
	for len(got) < 6 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("gave up: %d records", len(got))
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("a retriable error reached the application: %v", errs)
		}
		got = append(got, fs.Records()...)
	}
	<-recovered
	if storageErrs("KAFKA_STORAGE_ERROR") < 2 || got[0].Offset != 0 || got[5].Offset != 5 {
		t.Fatalf("storage errors %v, records %v", storageErrs("KAFKA_STORAGE_ERROR"), got)
	}

	l.set("t", 0, func(p *fakePart) { p.err = fmt.Errorf("copy object gone: %w", ErrDataLoss) })
	cl2 := newKgo(t, ts.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().At(2)}}))
	for {
		fs := cl2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("data loss never reported")
		}
		if errs := fs.Errors(); len(errs) > 0 {
			if !errors.Is(errs[0].Err, kerr.UnknownServerError) {
				t.Fatalf("data loss reported as %v", errs[0].Err)
			}
			break
		}
		if len(fs.Records()) > 0 {
			t.Fatalf("records read through data loss: %v", fs.Records())
		}
	}
}
