package listener

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// offsetsTopicLog serves __consumer_offsets partitions 8 and 17 only,
// from two real brokers' __consumer_offsets logs, and returns their
// records.
func offsetsTopicLog(t testing.TB) (*fakeLog, map[int32][]batch.Record) {
	l := newFakeLog()
	want := map[int32][]batch.Record{
		8:  servePartitionLog(t, l, TopicPartition{"__consumer_offsets", 8}, testfixtures.Path(t, "ldi-kafka370-kraft", "__consumer_offsets-6", "00000000000000000000.log")),
		17: servePartitionLog(t, l, TopicPartition{"__consumer_offsets", 17}, testfixtures.Path(t, "iechenyb-2019-plain", "kafka-logs", "__consumer_offsets-36", "00000000000000000000.log")),
	}
	l.set("__consumer_offsets", 8, func(p *fakePart) { p.epochs = []EpochEntry{{4, 0}} })
	return l, want
}

func metadataReq(version int16, topics ...*string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = version
	if topics != nil {
		r.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = n
		r.Topics = append(r.Topics, rt)
	}
	return r
}

func TestMetadata(t *testing.T) {
	l, _ := offsetsTopicLog(t)
	l.appendRaw(t, "plain", 0, v2(t, batch.NewParams(0, 0), rec("k", "v", 1)))
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "meta")
	for v := int16(0); v <= 12; v++ {
		var req *kmsg.MetadataRequest
		if v == 0 {
			req = metadataReq(0) // v0: an empty list means all topics
			req.Topics = []kmsg.MetadataRequestTopic{}
		} else {
			req = metadataReq(v) // null: all topics
		}
		resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 7 || resp.Brokers[0].Host != "127.0.0.1" {
			t.Fatalf("v%d brokers %+v", v, resp.Brokers)
		}
		if v >= 1 && resp.ControllerID != 7 {
			t.Fatalf("v%d controller %d", v, resp.ControllerID)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != "tierd-test") {
			t.Fatalf("v%d cluster id %v", v, resp.ClusterID)
		}
		if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "__consumer_offsets" || *resp.Topics[1].Topic != "plain" {
			t.Fatalf("v%d topics %+v", v, resp.Topics)
		}
		co := resp.Topics[0]
		if co.ErrorCode != 0 || len(co.Partitions) != 18 || (v >= 1 && !co.IsInternal) || (v >= 10 && co.TopicID != topicID("__consumer_offsets")) {
			t.Fatalf("v%d __consumer_offsets: %+v", v, co)
		}
		for i, p := range co.Partitions {
			held := i == 8 || i == 17
			switch {
			case p.Partition != int32(i):
				t.Fatalf("v%d partition %d listed as %d", v, i, p.Partition)
			case held && (p.ErrorCode != 0 || p.Leader != 7 || len(p.Replicas) != 1 || len(p.ISR) != 1):
				t.Fatalf("v%d held partition %+v", v, p)
			case !held && (p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1):
				t.Fatalf("v%d hole %+v", v, p)
			}
		}
		if v >= 7 && (co.Partitions[8].LeaderEpoch != 4 || co.Partitions[17].LeaderEpoch != -1) {
			t.Fatalf("v%d leader epochs %d, %d", v, co.Partitions[8].LeaderEpoch, co.Partitions[17].LeaderEpoch)
		}
	}
	// Named topics, in order, once each.
	names := []*string{kmsg.StringPtr("plain"), kmsg.StringPtr("nope"), kmsg.StringPtr("bad/name"), kmsg.StringPtr("plain"),
		kmsg.StringPtr("__transaction_state")}
	resp := rc.roundTrip(metadataReq(9, names...)).(*kmsg.MetadataResponse)
	want := []struct {
		name     string
		code     int16
		internal bool
	}{{"plain", 0, false}, {"nope", kerr.UnknownTopicOrPartition.Code, false}, {"bad/name", kerr.InvalidTopicException.Code, false},
		{"__transaction_state", kerr.UnknownTopicOrPartition.Code, true}}
	if len(resp.Topics) != len(want) {
		t.Fatalf("topics %+v", resp.Topics)
	}
	for i, w := range want {
		if got := resp.Topics[i]; *got.Topic != w.name || got.ErrorCode != w.code || got.IsInternal != w.internal {
			t.Fatalf("topic %d: %+v, want %+v", i, got, w)
		}
	}
	// v1+: an empty list means no topics.
	if resp := rc.roundTrip(metadataReq(4, []*string{}...)).(*kmsg.MetadataResponse); len(resp.Topics) != 0 {
		t.Fatalf("empty list: %+v", resp.Topics)
	}
	// v12: by topic id.
	byID := metadataReq(12)
	byID.Topics = []kmsg.MetadataRequestTopic{{TopicID: topicID("plain")}, {TopicID: topicID("gone")}}
	byID.IncludeTopicAuthorizedOperations = true
	resp = rc.roundTrip(byID).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "plain" ||
		resp.Topics[0].AuthorizedOperations != topicOpsReadDescribe || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("by id: %+v", resp.Topics)
	}
	// Ids before v12 are invalid requests.
	byID.Version = 11
	if resp := rc.roundTrip(byID).(*kmsg.MetadataResponse); resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("id at v11: %+v", resp.Topics[0])
	}
}

// TestKgoReadsPartitionsAroundHoles: __consumer_offsets 8 and 17, the rest
// missing: both held partitions read in full.
func TestKgoReadsPartitionsAroundHoles(t *testing.T) {
	l, want := offsetsTopicLog(t)
	ts := startServer(t, l, nil)
	counts := map[TopicPartition]int{}
	for p, w := range want {
		counts[TopicPartition{"__consumer_offsets", p}] = len(w)
	}
	got := consumeAll(t, ts.addr, counts)
	for p, w := range want {
		g := got[TopicPartition{"__consumer_offsets", p}]
		for i := range w {
			if err := sameRecord(g[i], w[i]); err != nil {
				t.Fatalf("partition %d: %v", p, err)
			}
		}
	}
}

// TestTopicsFailure: when the Log cannot list its topics, Metadata closes
// the connection (no Metadata version before v13 carries an error) and
// logs the failure; Fetch by topic id answers KAFKA_STORAGE_ERROR.
func TestTopicsFailure(t *testing.T) {
	l := smallLog(t)
	l.topicsErr = errTestStorage
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "meta-fail")
	rc.write(rc.frame(metadataReq(12)))
	rc.expectClosed()
	waitFor(t, "the close counted", func() bool { return ts.closed(reasonServerFailed) == 1 })
	if !strings.Contains(ts.logs.String(), "level=ERROR") || !strings.Contains(ts.logs.String(), "test storage failure") {
		t.Fatalf("failure not logged:\n%s", ts.logs.String())
	}
	rc = dialRaw(t, ts.addr, "fetch-fail")
	r := fetchReq{version: 13, maxBytes: 1 << 20, partMax: 1 << 20, topic: "t", offsets: map[int32]int64{0: 0}}
	if c := rc.roundTrip(r.build()).(*kmsg.FetchResponse).Topics[0].Partitions[0]; c.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch by id without topics: %+v", c)
	}
}
