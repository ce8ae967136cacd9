package listener

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// TestFetchLongPollClientGone: a client that closes its connection while
// its Fetch long-polls (max_wait_ms far beyond the test) frees the
// connection and the poll at once, instead of at max_wait_ms; the close is
// counted as the client's.
func TestFetchLongPollClientGone(t *testing.T) {
	ts := startServer(t, smallLog(t), nil)
	for i := 0; i < 3; i++ {
		rc := dialRaw(t, ts.addr, "gone")
		long := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, minBytes: 1, maxWait: 1<<31 - 1, topic: "t", offsets: map[int32]int64{0: 6}}
		rc.write(rc.frame(long.build()))
		waitFor(t, "the fetch to wait", func() bool { return strings.Contains(goroutines(), "longPoll") })
		rc.c.Close()
		waitFor(t, "the long poll to end", func() bool { return !strings.Contains(goroutines(), "longPoll") })
	}
	waitFor(t, "the connections to close", func() bool { return testutil.ToFloat64(ts.srv.m.conns) == 0 })
	if got := ts.closed(reasonClient); got != 3 {
		t.Fatalf("closed by the client: %v, want 3", got)
	}
	// The listener still answers.
	rc := dialRaw(t, ts.addr, "after")
	short := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, minBytes: 1, maxWait: 10, topic: "t", offsets: map[int32]int64{0: 0}}
	if p := rc.roundTrip(short.build()).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("after the closed long polls: %+v", p)
	}
}

// TestFetchLongPollPipelined: a request pipelined behind a long-polling
// Fetch is not mistaken for a closed connection: the poll runs to
// max_wait_ms, then both are answered in order.
func TestFetchLongPollPipelined(t *testing.T) {
	ts := startServer(t, smallLog(t), func(c *Config) { c.FetchPollIntervalMs = 5 })
	rc := dialRaw(t, ts.addr, "pipe")
	long := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, minBytes: 1, maxWait: 300, topic: "t", offsets: map[int32]int64{0: 6}}
	rc.write(append(rc.frame(long.build()), rc.frame(apiVersions(3))...))
	for _, want := range []int32{1, 2} {
		corr, _, err := rc.readFrame()
		if err != nil || corr != want {
			t.Fatalf("got corr %d (%v), want %d", corr, err, want)
		}
	}
	if got := ts.closed(reasonClient); got != 0 {
		t.Fatalf("closed by the client: %v", got)
	}
}

// TestFetchRepeatedPartition: a partition named several times, in one
// topic entry or in a repeated one, is answered once, where it was first
// named, from the position named last (Kafka keeps one entry per
// partition); a topic entry left with no partition is not answered.
func TestFetchRepeatedPartition(t *testing.T) {
	l, _ := budgetLog(t)
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "dup")
	for _, version := range []int16{12, 13} {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = version, -1, 1<<20, -1
		entry := func(parts ...int64) kmsg.FetchRequestTopic { // partition, offset pairs
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "big", topicID("big")
			for i := 0; i < len(parts); i += 2 {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = int32(parts[i]), parts[i+1], 1<<20, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt
		}
		req.Topics = []kmsg.FetchRequestTopic{entry(0, 0, 1, 0, 0, 1), entry(0, 2), entry(2, 1, 1, 2)}
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		type answer struct {
			p     int32
			first int64
			n     int
		}
		var got []answer
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("v%d partition %d: error %d", version, p.Partition, p.ErrorCode)
				}
				b, err := batch.ParseHeader(p.RecordBatches, 0)
				if err != nil {
					t.Fatalf("v%d partition %d: %v", version, p.Partition, err)
				}
				got = append(got, answer{p.Partition, b.BaseOffset, batchesIn(t, p.RecordBatches)})
			}
		}
		want := []answer{{0, 2, 1}, {1, 2, 1}, {2, 1, 2}}
		if len(resp.Topics) != 2 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("v%d: %d topic entries, partitions %v; want 2 entries, %v", version, len(resp.Topics), got, want)
		}
	}
}

// TestFetchMinBytesCappedByBudget: min_bytes above max_bytes is capped by
// it, as Kafka does: a fetch whose budget is full answers at once instead
// of waiting max_wait_ms (here far beyond the test's guard).
func TestFetchMinBytesCappedByBudget(t *testing.T) {
	l, size := budgetLog(t)
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "minbytes")
	req := fetchReq{maxBytes: int32(size), partMax: int32(size), minBytes: 1 << 30, maxWait: 1<<31 - 1, offsets: map[int32]int64{0: 0}}
	p := rc.roundTrip(req.build()).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || batchesIn(t, p.RecordBatches) != 1 {
		t.Fatalf("got %+v", p)
	}
}

// TestMetadataRepeatedTopicID: a topic id named many times (v12) is
// answered once, as a repeated name is, so a small request cannot ask for
// the same topic's every partition thousands of times over.
func TestMetadataRepeatedTopicID(t *testing.T) {
	l, _ := offsetsTopicLog(t)
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "meta")
	req := metadataReq(12)
	req.Topics = []kmsg.MetadataRequestTopic{}
	for i := 0; i < 1000; i++ {
		for _, id := range [][16]byte{topicID("__consumer_offsets"), {1}} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = id
			req.Topics = append(req.Topics, rt)
		}
	}
	resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 18 ||
		resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("%d topics answered, want __consumer_offsets then an unknown id once each", len(resp.Topics))
	}
}

// TestMetadataPartitionNumberTooHigh: a held partition numbered beyond
// any real topic (a stray "<topic>-<huge>" directory) is not listed, nor
// are the holes up to it; it is logged once; the topic's other partitions
// are listed as before.
func TestMetadataPartitionNumberTooHigh(t *testing.T) {
	l := smallLog(t)
	for _, p := range []int32{150000, 1 << 20} {
		l.appendRaw(t, "t", p, v2(t, batch.NewParams(0, 0), rec("k", "v", 1)))
	}
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "meta")
	for i := 0; i < 2; i++ {
		resp := rc.roundTrip(metadataReq(12)).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("topics %d, partitions %d; want t with partition 0 only", len(resp.Topics), len(resp.Topics[0].Partitions))
		}
	}
	if n := strings.Count(ts.logs.String(), "partition number too high"); n != 1 {
		t.Fatalf("logged %d times, want once", n)
	}
}
