package listener

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// budgetLog holds topic "big", partitions 0-2, each three batches of one
// 1000-byte value (offsets 0, 1, 2; leader epoch 2).
func budgetLog(t testing.TB) (*fakeLog, int) {
	l := newFakeLog()
	var size int
	for p := int32(0); p < 3; p++ {
		for o := int64(0); o < 3; o++ {
			b := v2(t, batch.NewParams(o, 2), rec(fmt.Sprint(p), strings.Repeat("x", 1000), 10+o))
			size = len(b)
			l.appendRaw(t, "big", p, b)
		}
		l.set("big", p, func(fp *fakePart) { fp.epochs = []EpochEntry{{2, 0}} })
	}
	return l, size
}

type fetchReq struct {
	version           int16
	maxBytes, partMax int32
	minBytes, maxWait int32
	iso               int8
	offsets           map[int32]int64 // partition → fetch offset, topic "big" unless topic set
	topic             string
	epoch             int32
	sessionEpoch      int32
	topicID           [16]byte
	partitionsInOrder []int32
}

func (f fetchReq) build() *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxBytes, r.MinBytes, r.MaxWaitMillis, r.IsolationLevel, r.SessionEpoch = f.version, f.maxBytes, f.minBytes, f.maxWait, f.iso, f.sessionEpoch
	if r.Version == 0 {
		r.Version = 12
	}
	if f.topic == "" {
		f.topic = "big"
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = f.topic, f.topicID
	if f.topicID == ([16]byte{}) {
		rt.TopicID = topicID(f.topic)
	}
	order := f.partitionsInOrder
	if order == nil {
		for p := int32(0); p < 3; p++ {
			if _, ok := f.offsets[p]; ok {
				order = append(order, p)
			}
		}
	}
	for _, p := range order {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, f.offsets[p], f.partMax, f.epoch
		if f.epoch == 0 {
			rp.CurrentLeaderEpoch = -1
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

// batchesIn counts the whole entries in records.
func batchesIn(t testing.TB, recs []byte) int {
	n := 0
	for pos := 0; pos < len(recs); n++ {
		b, err := batch.ParseHeader(recs[pos:], int64(pos))
		if err != nil {
			t.Fatalf("records: %v", err)
		}
		pos += int(b.Size)
	}
	return n
}

// TestFetchBudget: max_bytes, partition_max_bytes and fetch.max.bytes
// with Kafka's "first batch of the first non-empty partition" rule.
func TestFetchBudget(t *testing.T) {
	l, size := budgetLog(t)
	ts := startServer(t, l, func(c *Config) { c.FetchMaxBytes = int32(2*size + 10) })
	rc := dialRaw(t, ts.addr, "budget")
	all := map[int32]int64{0: 0, 1: 0, 2: 0}
	for _, tc := range []struct {
		name string
		req  fetchReq
		want []int // batches per partition, in request order
	}{
		{"max_bytes below one batch", fetchReq{maxBytes: 10, partMax: 1 << 20, offsets: all}, []int{1, 0, 0}},
		{"partition_max_bytes below one batch", fetchReq{maxBytes: 1 << 20, partMax: 10, offsets: all}, []int{1, 0, 0}},
		{"fetch.max.bytes caps max_bytes", fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, offsets: all}, []int{2, 0, 0}},
		{"room for more partitions", fetchReq{maxBytes: int32(2*size + 5), partMax: int32(size), offsets: all}, []int{1, 1, 0}},
		{"first non-empty partition gets its batch", fetchReq{maxBytes: 10, partMax: 10,
			offsets: map[int32]int64{0: 3, 1: 2, 2: 0}}, []int{0, 1, 0}},
		{"request order", fetchReq{maxBytes: 10, partMax: 10, offsets: all, partitionsInOrder: []int32{2, 0, 1}}, []int{1, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := rc.roundTrip(tc.req.build()).(*kmsg.FetchResponse)
			if resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 1 {
				t.Fatalf("response error %d session %d topics %d", resp.ErrorCode, resp.SessionID, len(resp.Topics))
			}
			for i, p := range resp.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.HighWatermark != 3 || p.LastStableOffset != 3 || p.LogStartOffset != 0 || p.PreferredReadReplica != -1 {
					t.Fatalf("partition %d: %+v", p.Partition, p)
				}
				if p.AbortedTransactions != nil {
					t.Fatalf("read_uncommitted aborted transactions %v, want null", p.AbortedTransactions)
				}
				if n := batchesIn(t, p.RecordBatches); n != tc.want[i] {
					t.Fatalf("partition %d: %d batches, want %d", p.Partition, n, tc.want[i])
				}
			}
		})
	}
}

// TestFetchErrors: each error class as Kafka answers it, and the sessions
// rules.
func TestFetchErrors(t *testing.T) {
	l, _ := budgetLog(t)
	l.set("big", 1, func(fp *fakePart) { fp.err = fmt.Errorf("store: %w", ErrUnavailable) })
	l.set("big", 2, func(fp *fakePart) { fp.err = fmt.Errorf("copy gone: %w", ErrDataLoss) })
	l.set("big", 0, func(fp *fakePart) { fp.logStart = 1 })
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "errs")
	code := func(resp *kmsg.FetchResponse, p int32) kmsg.FetchResponseTopicPartition {
		for _, rp := range resp.Topics[0].Partitions {
			if rp.Partition == p {
				return rp
			}
		}
		t.Fatalf("partition %d missing", p)
		return kmsg.FetchResponseTopicPartition{}
	}
	big := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, offsets: map[int32]int64{0: 7, 1: 0, 2: 0}}
	for _, v := range []int16{5, 12} {
		big.version = v
		resp := rc.roundTrip(big.build()).(*kmsg.FetchResponse)
		oor := code(resp, 0)
		if oor.ErrorCode != kerr.OffsetOutOfRange.Code || oor.LogStartOffset != 1 || oor.HighWatermark != 3 {
			t.Fatalf("v%d out of range: %+v", v, oor)
		}
		wantUnavail := kerr.KafkaStorageError.Code
		if v <= 5 {
			wantUnavail = kerr.NotLeaderForPartition.Code
		}
		if c := code(resp, 1); c.ErrorCode != wantUnavail || c.HighWatermark != -1 {
			t.Fatalf("v%d unavailable: %+v", v, c)
		}
		if c := code(resp, 2); c.ErrorCode != kerr.UnknownServerError.Code {
			t.Fatalf("v%d data loss: %+v", v, c)
		}
	}
	below := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, offsets: map[int32]int64{0: 0}}
	if c := code(rc.roundTrip(below.build()).(*kmsg.FetchResponse), 0); c.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("below the log start: %+v", c)
	}
	unknown := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, topic: "nope", offsets: map[int32]int64{0: 0}}
	if c := code(rc.roundTrip(unknown.build()).(*kmsg.FetchResponse), 0); c.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %+v", c)
	}
	unknown.version = 13 // by id: an id tierd does not hold
	if c := code(rc.roundTrip(unknown.build()).(*kmsg.FetchResponse), 0); c.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %+v", c)
	}
	byID := fetchReq{version: 16, maxBytes: 1 << 20, partMax: 1 << 20, offsets: map[int32]int64{0: 1}}
	if c := code(rc.roundTrip(byID.build()).(*kmsg.FetchResponse), 0); c.ErrorCode != 0 || batchesIn(t, c.RecordBatches) != 2 {
		t.Fatalf("v16 by topic id: %+v", c)
	}
	// Leader epochs: the log's is 2.
	for _, tc := range []struct {
		epoch int32
		want  int16
	}{{-1, 0}, {2, 0}, {1, kerr.FencedLeaderEpoch.Code}, {3, kerr.UnknownLeaderEpoch.Code}} {
		r := fetchReq{version: 16, maxBytes: 1 << 20, partMax: 1 << 20, offsets: map[int32]int64{0: 1}, epoch: tc.epoch}
		resp := rc.roundTrip(r.build()).(*kmsg.FetchResponse)
		c := code(resp, 0)
		if c.ErrorCode != tc.want {
			t.Fatalf("current leader epoch %d: code %d, want %d", tc.epoch, c.ErrorCode, tc.want)
		}
		if tc.want == kerr.FencedLeaderEpoch.Code && (c.CurrentLeader.LeaderID != 7 || c.CurrentLeader.LeaderEpoch != 2 ||
			len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 7) {
			t.Fatalf("fenced v16 answer names no leader: %+v brokers %+v", c.CurrentLeader, resp.Brokers)
		}
	}
	// Sessions: an incremental fetch finds no session; full fetches are
	// answered sessionless.
	inc := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, offsets: map[int32]int64{0: 1}, sessionEpoch: 3}
	if resp := rc.roundTrip(inc.build()).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || len(resp.Topics) != 0 {
		t.Fatalf("incremental fetch: %+v", resp)
	}
	inc.sessionEpoch = -1
	if resp := rc.roundTrip(inc.build()).(*kmsg.FetchResponse); resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 1 {
		t.Fatalf("sessionless fetch: %+v", resp)
	}
	if v := testutil.ToFloat64(ts.srv.m.errors.WithLabelValues("Fetch", "OFFSET_OUT_OF_RANGE")); v != 3 {
		t.Fatalf("OFFSET_OUT_OF_RANGE counted %v times, want 3", v)
	}
	if !strings.Contains(ts.logs.String(), "data loss") {
		t.Fatalf("data loss not logged:\n%s", ts.logs.String())
	}
}

// TestFetchReadCommitted: aborted transactions for read_committed (an
// empty list when none overlap), null for read_uncommitted; the last
// stable offset bounds read_committed.
func TestFetchReadCommitted(t *testing.T) {
	ts := startServer(t, txnLog(t), nil)
	rc := dialRaw(t, ts.addr, "rc")
	for _, tc := range []struct {
		iso     int8
		offset  int64
		aborted []int64 // producer ids; nil means null
		last    int64   // last offset returned
	}{
		{1, 0, []int64{10}, 8},
		{1, 7, []int64{}, 8},
		{0, 0, nil, 10},
	} {
		r := fetchReq{version: 4, iso: tc.iso, maxBytes: 1 << 20, partMax: 1 << 20, topic: "txn", offsets: map[int32]int64{0: tc.offset}}
		resp := rc.roundTrip(r.build()).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 11 || p.LastStableOffset != 9 {
			t.Fatalf("iso %d: %+v", tc.iso, p)
		}
		if (p.AbortedTransactions == nil) != (tc.aborted == nil) || len(p.AbortedTransactions) != len(tc.aborted) {
			t.Fatalf("iso %d from %d: aborted %v, want %v", tc.iso, tc.offset, p.AbortedTransactions, tc.aborted)
		}
		for i, a := range p.AbortedTransactions {
			if a.ProducerID != tc.aborted[i] || a.FirstOffset != 2 {
				t.Fatalf("aborted %+v", a)
			}
		}
		var last int64 = -1
		for pos := 0; pos < len(p.RecordBatches); {
			b, err := batch.ParseHeader(p.RecordBatches[pos:], int64(pos))
			if err != nil {
				t.Fatal(err)
			}
			last, pos = b.LastOffset, pos+int(b.Size)
		}
		if last != tc.last {
			t.Fatalf("iso %d: last offset %d, want %d", tc.iso, last, tc.last)
		}
	}
}

// TestFetchZstd: zstd batches need Fetch v10 (KIP-110).
func TestFetchZstd(t *testing.T) {
	l := newFakeLog()
	p := batch.NewParams(0, 0)
	p.Codec = batch.CodecZstd
	z := v2(t, p, rec("k", "zstd value", 5))
	l.appendRaw(t, "z", 0, z)
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "z")
	for _, tc := range []struct {
		version int16
		code    int16
	}{{9, kerr.UnsupportedCompressionType.Code}, {10, 0}} {
		r := fetchReq{version: tc.version, maxBytes: 1 << 20, partMax: 1 << 20, topic: "z", offsets: map[int32]int64{0: 0}}
		c := rc.roundTrip(r.build()).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if c.ErrorCode != tc.code || (tc.code == 0 && !bytes.Equal(c.RecordBatches, z)) {
			t.Fatalf("v%d: code %d, %d bytes", tc.version, c.ErrorCode, len(c.RecordBatches))
		}
	}
}

// TestFetchLongPoll: a fetch at the end waits for min_bytes and returns
// as soon as data arrives; without data it answers empty at max_wait; a
// stopping listener answers a waiting fetch at once and closes.
func TestFetchLongPoll(t *testing.T) {
	l := smallLog(t)
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "lp")
	short := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, minBytes: 1, maxWait: 200, topic: "t", offsets: map[int32]int64{0: 6}}
	if c := rc.roundTrip(short.build()).(*kmsg.FetchResponse).Topics[0].Partitions[0]; c.ErrorCode != 0 || len(c.RecordBatches) != 0 || c.HighWatermark != 6 {
		t.Fatalf("empty long poll: %+v", c)
	}
	// max_wait far beyond the test's guard: only an early answer passes.
	long := short
	long.maxWait = 600000
	rc.write(rc.frame(long.build()))
	waitFor(t, "the fetch to wait", func() bool { return strings.Contains(goroutines(), "longPoll") })
	l.appendRaw(t, "t", 0, v2(t, batch.NewParams(6, 3), rec("k", "new", 3000)))
	_, body, err := rc.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	if err := resp.ReadFrom(skipTags(body)); err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].Partitions[0]; batchesIn(t, c.RecordBatches) != 1 || c.HighWatermark != 7 {
		t.Fatalf("woken fetch: %+v", c)
	}

	// Shutdown answers a waiting fetch.
	srv, err := New(DefaultConfig(), l)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	rc2 := dialRaw(t, lis.Addr().String(), "stop")
	long.offsets = map[int32]int64{0: 7}
	rc2.write(rc2.frame(long.build()))
	waitFor(t, "the fetch to wait", func() bool { return strings.Contains(goroutines(), "longPoll") })
	cancel()
	if _, _, err := rc2.readFrame(); err != nil {
		t.Fatalf("no answer at shutdown: %v", err)
	}
	rc2.expectClosed()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
