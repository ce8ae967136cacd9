package listener

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetsLog is smallLog (offsets 0-5, timestamps 1000-1005, epochs 0 at
// 0 and 3 at 4) with log start 2, local log start 4, highest tiered 3;
// partition 1 of the same topic has nothing tiered and a last stable
// offset of 5.
func offsetsLog(t testing.TB) *fakeLog {
	l := smallLog(t)
	l.set("t", 0, func(p *fakePart) { p.logStart, p.localStart, p.tiered = 2, 4, 3 })
	for _, e := range l.topics["t"].parts[0].entries {
		l.appendRaw(t, "t", 1, e.raw)
	}
	l.set("t", 1, func(p *fakePart) { p.epochs, p.lso = []EpochEntry{{0, 0}, {3, 4}}, 5 })
	return l
}

func listOffsets(version int16, iso int8, parts ...kmsg.ListOffsetsRequestTopicPartition) *kmsg.ListOffsetsRequest {
	r := kmsg.NewPtrListOffsetsRequest()
	r.Version, r.IsolationLevel = version, iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic, rt.Partitions = "t", parts
	r.Topics = append(r.Topics, rt)
	return r
}

func lop(p int32, ts int64, epoch int32) kmsg.ListOffsetsRequestTopicPartition {
	x := kmsg.NewListOffsetsRequestTopicPartition()
	x.Partition, x.Timestamp, x.CurrentLeaderEpoch, x.MaxNumOffsets = p, ts, epoch, 1
	return x
}

// listed is one partition's ListOffsets answer.
type listed struct {
	code          int16
	offset, tstmp int64
	epoch         int32
}

func TestListOffsets(t *testing.T) {
	ts := startServer(t, offsetsLog(t), nil)
	rc := dialRaw(t, ts.addr, "lo")
	type want = listed
	for _, tc := range []struct {
		name    string
		version int16
		iso     int8
		p       kmsg.ListOffsetsRequestTopicPartition
		want    want
	}{
		{"earliest", 9, 0, lop(0, -2, -1), want{0, 2, -1, 0}},
		{"earliest local", 9, 0, lop(0, -4, -1), want{0, 4, -1, 3}},
		{"latest", 9, 0, lop(0, -1, -1), want{0, 6, -1, 3}},
		{"latest tiered", 9, 0, lop(0, -5, -1), want{0, 3, -1, 0}},
		{"latest tiered, nothing tiered", 9, 0, lop(1, -5, -1), want{0, -1, -1, -1}},
		{"max timestamp", 9, 0, lop(0, -3, -1), want{0, 5, 1005, 3}},
		{"timestamp", 9, 0, lop(0, 1003, -1), want{0, 3, 1003, 0}},
		{"timestamp below the log start", 9, 0, lop(0, 1000, -1), want{0, 2, 1002, 0}},
		{"timestamp after every record", 9, 0, lop(0, 5000, -1), want{0, -1, -1, -1}},
		{"latest read_committed", 9, 1, lop(1, -1, -1), want{0, 5, -1, 3}},
		{"max timestamp past the last stable offset", 9, 1, lop(1, -3, -1), want{0, -1, -1, -1}},
		{"max timestamp read_uncommitted", 9, 0, lop(1, -3, -1), want{0, 5, 1005, 3}},
		{"current epoch", 9, 0, lop(0, -1, 3), want{0, 6, -1, 3}},
		{"fenced epoch", 9, 0, lop(0, -1, 2), want{kerr.FencedLeaderEpoch.Code, -1, -1, -1}},
		{"unknown epoch", 9, 0, lop(0, -1, 4), want{kerr.UnknownLeaderEpoch.Code, -1, -1, -1}},
		{"epochs before v4 unchecked", 3, 0, lop(0, -1, 2), want{0, 6, -1, -1}},
		{"max timestamp before v7", 6, 0, lop(0, -3, -1), want{kerr.UnsupportedVersion.Code, -1, -1, -1}},
		{"earliest local before v8", 7, 0, lop(0, -4, -1), want{kerr.UnsupportedVersion.Code, -1, -1, -1}},
		{"latest tiered before v9", 8, 0, lop(0, -5, -1), want{kerr.UnsupportedVersion.Code, -1, -1, -1}},
		{"unknown special timestamp", 9, 0, lop(0, -6, -1), want{kerr.UnsupportedVersion.Code, -1, -1, -1}},
		{"v1 earliest", 1, 0, lop(0, -2, -1), want{0, 2, -1, -1}},
		{"unknown partition", 9, 0, lop(5, -1, -1), want{kerr.UnknownTopicOrPartition.Code, -1, -1, -1}},
	} {
		resp := rc.roundTrip(listOffsets(tc.version, tc.iso, tc.p)).(*kmsg.ListOffsetsResponse)
		p := resp.Topics[0].Partitions[0]
		got := want{p.ErrorCode, p.Offset, p.Timestamp, p.LeaderEpoch}
		if got != tc.want {
			t.Errorf("%s (v%d): got %+v, want %+v", tc.name, tc.version, got, tc.want)
		}
	}
	dup := rc.roundTrip(listOffsets(5, 0, lop(0, -1, -1), lop(0, -2, -1))).(*kmsg.ListOffsetsResponse)
	for _, p := range dup.Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("duplicate partition: %+v", p)
		}
	}
	// v0: old-style offsets.
	for _, tc := range []struct {
		ts   int64
		max  int32
		code int16
		want []int64
	}{{-1, 1, 0, []int64{6}}, {-2, 1, 0, []int64{2}}, {1004, 1, 0, []int64{4}}, {9999, 1, 0, []int64{6}}, {-1, 0, 0, []int64{}},
		{-3, 1, kerr.UnsupportedVersion.Code, nil}} {
		p := lop(0, tc.ts, -1)
		p.MaxNumOffsets = tc.max
		r := rc.roundTrip(listOffsets(0, 0, p)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if r.ErrorCode != tc.code || len(r.OldStyleOffsets) != len(tc.want) || (len(tc.want) == 1 && r.OldStyleOffsets[0] != tc.want[0]) {
			t.Fatalf("v0 %d max %d: %+v, want %v", tc.ts, tc.max, r, tc.want)
		}
	}
	// Through franz-go's admin client.
	adm := kadm.NewClient(newKgo(t, ts.addr))
	starts, err := adm.ListStartOffsets(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("t", 0); o.Offset != 2 || o.LeaderEpoch != 0 {
		t.Fatalf("kadm start offset %+v", o)
	}
	after, err := adm.ListOffsetsAfterMilli(context.Background(), 1004, "t")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := after.Lookup("t", 0); o.Offset != 4 || o.Timestamp != 1004 || o.LeaderEpoch != 3 {
		t.Fatalf("kadm offset after 1004 ms %+v", o)
	}
}

func TestEndOffsetFor(t *testing.T) {
	lineage := []EpochEntry{{0, 0}, {3, 4}, {5, 10}}
	for _, tc := range []struct {
		epochs    []EpochEntry
		req       int32
		wantEpoch int32
		wantEnd   int64
	}{
		{lineage, 5, 5, 12}, // the latest: the log end
		{lineage, 3, 3, 10},
		{lineage, 4, 3, 10}, // between: the largest epoch below
		{lineage, 0, 0, 4},
		{lineage, 1, 0, 4},
		{lineage, 6, -1, -1}, // above the latest
		{lineage, -1, -1, -1},
		{[]EpochEntry{{2, 5}, {4, 9}}, 1, 1, 5}, // below the first: its start
		{nil, 0, -1, -1},
	} {
		e, o := endOffsetFor(tc.epochs, tc.req, 12)
		if e != tc.wantEpoch || o != tc.wantEnd {
			t.Errorf("%v epoch %d: got (%d, %d), want (%d, %d)", tc.epochs, tc.req, e, o, tc.wantEpoch, tc.wantEnd)
		}
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	l := offsetsLog(t)
	l.set("t", 0, func(p *fakePart) { p.epochs = []EpochEntry{{0, 0}, {3, 4}, {5, 5}} })
	ts := startServer(t, l, nil)
	rc := dialRaw(t, ts.addr, "ofle")
	req := func(version int16, epoch, current int32, p int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.Version, r.ReplicaID = version, -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.CurrentLeaderEpoch = p, epoch, current
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return rc.roundTrip(r).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		version        int16
		epoch, current int32
		p              int32
		code           int16
		wantEpoch      int32
		wantEnd        int64
	}{
		{4, 5, 5, 0, 0, 5, 6},
		{4, 3, -1, 0, 0, 3, 5},
		{4, 4, -1, 0, 0, 3, 5},
		{4, 0, -1, 0, 0, 0, 4},
		{4, 3, 4, 0, kerr.FencedLeaderEpoch.Code, -1, -1},
		{4, 3, 6, 0, kerr.UnknownLeaderEpoch.Code, -1, -1},
		{1, 3, 4, 0, 0, 3, 5}, // no current epoch before v2
		{0, 3, -1, 0, 0, -1, 5},
		{4, 3, -1, 9, kerr.UnknownTopicOrPartition.Code, -1, -1},
	} {
		got := req(tc.version, tc.epoch, tc.current, tc.p)
		if got.ErrorCode != tc.code || got.LeaderEpoch != tc.wantEpoch || got.EndOffset != tc.wantEnd {
			t.Errorf("v%d epoch %d current %d: got code %d (%d, %d), want %d (%d, %d)", tc.version, tc.epoch, tc.current,
				got.ErrorCode, got.LeaderEpoch, got.EndOffset, tc.code, tc.wantEpoch, tc.wantEnd)
		}
	}
	// franz-go's own request (it picks the version).
	r := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.LeaderEpoch = 4
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	resp, err := r.RequestWith(context.Background(), newKgo(t, ts.addr))
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderEpoch != 3 || p.EndOffset != 5 {
		t.Fatalf("franz-go: %+v", p)
	}
}
