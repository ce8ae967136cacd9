package listener

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// rulesLog holds, in topic "r", ten one-record batches (offsets 0-9,
// timestamp 1000+10*offset except offset 7 at 5000, the largest) written
// under epochs 0 (offsets 0-2), 1 (3-5), 2 (6-7) and 4 (8-9); the lineage
// starts at offset 0 in every partition, before any log start below:
//
//   - partition 0, retention: log start 4, local log start 6, highest
//     tiered 5 (Kafka's lineage after truncateFromStart(4): 1@4 2@6 4@8).
//   - partition 1, delete-records inside a local segment and an epoch:
//     log start 7, local log start 6, highest tiered 7 (2@7 4@8).
//   - partition 2, delete-records up to the high watermark: log start
//     10, nothing local, highest tiered 9 (4@10).
//
// Topic "x", partition 0, holds a transaction left open: offsets 0-3
// plain (epoch 0, timestamps 1000-1003), 4-5 transactional (epoch 1,
// timestamps 9000 and 9001), high watermark 6, last stable offset 4,
// highest tiered 4, lineage 0@0 1@4.
func rulesLog(t testing.TB) *fakeLog {
	l := newFakeLog()
	epochOf := func(o int64) int32 {
		switch {
		case o < 3:
			return 0
		case o < 6:
			return 1
		case o < 8:
			return 2
		}
		return 4
	}
	lineage := []EpochEntry{{0, 0}, {1, 3}, {2, 6}, {4, 8}}
	for p := int32(0); p < 3; p++ {
		for o := int64(0); o < 10; o++ {
			ts := 1000 + 10*o
			if o == 7 {
				ts = 5000
			}
			l.appendRaw(t, "r", p, v2(t, batch.NewParams(o, epochOf(o)), rec("k", "v", ts)))
		}
	}
	l.set("r", 0, func(p *fakePart) { p.logStart, p.localStart, p.tiered, p.epochs = 4, 6, 5, lineage })
	l.set("r", 1, func(p *fakePart) { p.logStart, p.localStart, p.tiered, p.epochs = 7, 6, 7, lineage })
	l.set("r", 2, func(p *fakePart) { p.logStart, p.localStart, p.tiered, p.epochs = 10, -1, 9, lineage })
	for o := int64(0); o < 4; o++ {
		l.appendRaw(t, "x", 0, v2(t, batch.NewParams(o, 0), rec("k", "v", 1000+o)))
	}
	l.appendRaw(t, "x", 0, v2(t, txnParams(4, 1, 7), rec("k", "t", 9000), rec("k", "u", 9001)))
	l.set("x", 0, func(p *fakePart) { p.lso, p.tiered, p.epochs = 4, 4, []EpochEntry{{0, 0}, {1, 4}} })
	return l
}

// TestListOffsetsRules checks every ListOffsets rule of the package doc's
// table against what Kafka's rules give for rulesLog; "was" notes tierd's
// answer before it followed them.
func TestListOffsetsRules(t *testing.T) {
	ts := startServer(t, rulesLog(t), nil)
	rc := dialRaw(t, ts.addr, "rules")
	type answer = listed
	none := answer{0, -1, -1, -1}
	unsupported := answer{kerr.UnsupportedVersion.Code, -1, -1, -1}
	for _, tc := range []struct {
		name    string
		topic   string
		p       int32
		version int16
		iso     int8
		ts      int64
		current int32
		want    answer
	}{
		// EARLIEST: UnifiedLog.fetchOffsetByTimestamp, the earliest entry
		// of the trimmed lineage (was epoch 0, the untrimmed first entry).
		{"retention: earliest", "r", 0, 9, 0, -2, -1, answer{0, 4, -1, 1}},
		{"delete-records: earliest", "r", 1, 9, 0, -2, -1, answer{0, 7, -1, 2}},
		{"delete-records to the end: earliest", "r", 2, 9, 0, -2, -1, answer{0, 10, -1, 4}},
		// EARLIEST_LOCAL: localLogStartOffset, never below the log start
		// (was 6 for partition 1).
		{"retention: earliest local", "r", 0, 9, 0, -4, -1, answer{0, 6, -1, 2}},
		{"delete-records: earliest local", "r", 1, 9, 0, -4, -1, answer{0, 7, -1, 2}},
		{"delete-records to the end: earliest local", "r", 2, 9, 0, -4, -1, answer{0, 10, -1, 4}},
		// LATEST: Partition.fetchOffsetForTimestamp, lastFetchableOffset.
		{"latest", "r", 0, 9, 0, -1, -1, answer{0, 10, -1, 4}},
		{"latest read_uncommitted, open transaction", "x", 0, 9, 0, -1, -1, answer{0, 6, -1, 1}},
		{"latest read_committed, open transaction", "x", 0, 9, 1, -1, -1, answer{0, 4, -1, 1}},
		// LATEST_TIERED: highestOffsetInRemoteStorage, its epoch, and
		// bounded by lastFetchableOffset (was 4 with epoch 1 under
		// read_committed; was epoch 4 for partition 2, whose trimmed
		// lineage starts after offset 9).
		{"retention: latest tiered", "r", 0, 9, 0, -5, -1, answer{0, 5, -1, 1}},
		{"delete-records: latest tiered", "r", 1, 9, 0, -5, -1, answer{0, 7, -1, 2}},
		{"delete-records to the end: latest tiered", "r", 2, 9, 0, -5, -1, answer{0, 9, -1, -1}},
		{"latest tiered read_uncommitted", "x", 0, 9, 0, -5, -1, answer{0, 4, -1, 1}},
		{"latest tiered at the last stable offset", "x", 0, 9, 1, -5, -1, none},
		// MAX_TIMESTAMP: the largest timestamp, bounded by
		// lastFetchableOffset (ReplicaManager.fetchOffset).
		{"retention: max timestamp", "r", 0, 9, 0, -3, -1, answer{0, 7, 5000, 2}},
		{"delete-records: max timestamp", "r", 1, 9, 0, -3, -1, answer{0, 7, 5000, 2}},
		{"delete-records to the end: max timestamp", "r", 2, 9, 0, -3, -1, none},
		{"max timestamp read_uncommitted, open transaction", "x", 0, 9, 0, -3, -1, answer{0, 5, 9001, 1}},
		{"max timestamp in the open transaction, read_committed", "x", 0, 9, 1, -3, -1, none},
		// A timestamp: the first record at or after the log start whose
		// timestamp reaches it, bounded by lastFetchableOffset.
		{"retention: timestamp below the log start", "r", 0, 9, 0, 1000, -1, answer{0, 4, 1040, 1}},
		{"retention: timestamp", "r", 0, 9, 0, 1051, -1, answer{0, 6, 1060, 2}},
		{"delete-records: timestamp below the log start", "r", 1, 9, 0, 1000, -1, answer{0, 7, 5000, 2}},
		{"retention: the first record reaching it, not the closest", "r", 0, 9, 0, 1081, -1, answer{0, 7, 5000, 2}},
		{"retention: after the largest timestamp's record", "r", 0, 9, 0, 1085, -1, answer{0, 7, 5000, 2}},
		{"delete-records: timestamp", "r", 1, 9, 0, 5000, -1, answer{0, 7, 5000, 2}},
		{"delete-records: timestamp after every record", "r", 1, 9, 0, 5001, -1, none},
		{"delete-records to the end: timestamp", "r", 2, 9, 0, 0, -1, none},
		{"timestamp after every record", "r", 0, 9, 0, 9999, -1, none},
		{"timestamp read_committed below the last stable offset", "x", 0, 9, 1, 1002, -1, answer{0, 2, 1002, 0}},
		{"timestamp read_uncommitted in the open transaction", "x", 0, 9, 0, 8000, -1, answer{0, 4, 9000, 1}},
		{"timestamp read_committed in the open transaction", "x", 0, 9, 1, 8000, -1, none},
		{"timestamp v1", "r", 0, 1, 0, 1051, -1, answer{0, 6, 1060, -1}},
		// Versions: ReplicaManager.timestampMinSupportedVersion.
		{"earliest v1", "r", 0, 1, 0, -2, -1, answer{0, 4, -1, -1}},
		{"latest v1", "r", 0, 1, 0, -1, -1, answer{0, 10, -1, -1}},
		{"read_committed v2", "x", 0, 2, 1, -1, -1, answer{0, 4, -1, -1}},
		{"epochs from v4", "r", 0, 4, 0, -2, -1, answer{0, 4, -1, 1}},
		{"max timestamp v6", "r", 0, 6, 0, -3, -1, unsupported},
		{"max timestamp v1", "r", 0, 1, 0, -3, -1, unsupported},
		{"max timestamp v7", "r", 0, 7, 0, -3, -1, answer{0, 7, 5000, 2}},
		{"earliest local v7", "r", 0, 7, 0, -4, -1, unsupported},
		{"earliest local v8", "r", 0, 8, 0, -4, -1, answer{0, 6, -1, 2}},
		{"latest tiered v8", "r", 0, 8, 0, -5, -1, unsupported},
		{"earliest pending upload (KIP-1023)", "r", 0, 9, 0, -6, -1, unsupported},
		{"unknown negative timestamp", "r", 0, 9, 0, -7, -1, unsupported},
		// current_leader_epoch: Partition.localLogWithEpochOrThrow.
		{"current epoch", "r", 0, 9, 0, -2, 4, answer{0, 4, -1, 1}},
		{"fenced epoch", "r", 0, 9, 0, -2, 3, answer{kerr.FencedLeaderEpoch.Code, -1, -1, -1}},
		{"unknown epoch", "r", 0, 9, 0, -2, 5, answer{kerr.UnknownLeaderEpoch.Code, -1, -1, -1}},
		{"current epoch unchecked before v4", "r", 0, 3, 0, -2, 3, answer{0, 4, -1, -1}},
	} {
		r := listOffsets(tc.version, tc.iso, lop(tc.p, tc.ts, tc.current))
		r.Topics[0].Topic = tc.topic
		p := rc.roundTrip(r).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if got := (answer{p.ErrorCode, p.Offset, p.Timestamp, p.LeaderEpoch}); got != tc.want {
			t.Errorf("%s (%s-%d v%d, timestamp %d): got %+v, want %+v", tc.name, tc.topic, tc.p, tc.version, tc.ts, got, tc.want)
		}
	}
	// v0 answers only LATEST and EARLIEST among negative timestamps
	// (KafkaApis.handleListOffsetRequestV0).
	for _, ts := range []int64{-3, -4, -5} {
		r := listOffsets(0, 0, lop(0, ts, -1))
		r.Topics[0].Topic = "r"
		if got := rc.roundTrip(r).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; got.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("v0 timestamp %d: %+v, want UNSUPPORTED_VERSION", ts, got)
		}
	}
}

// TestOffsetForLeaderEpochRules checks OffsetForLeaderEpoch against
// LeaderEpochFileCache.endOffsetFor over the lineage trimmed to the log
// start (truncateFromStart), the high watermark as the log end; "was"
// notes tierd's answer over the untrimmed lineage.
func TestOffsetForLeaderEpochRules(t *testing.T) {
	ts := startServer(t, rulesLog(t), nil)
	rc := dialRaw(t, ts.addr, "rules")
	type answer struct {
		code  int16
		epoch int32
		end   int64
	}
	undefined := answer{0, -1, -1}
	for _, tc := range []struct {
		name      string
		topic     string
		p         int32
		version   int16
		requested int32
		current   int32
		want      answer
	}{
		// Below the trimmed lineage: the requested epoch, ending at the
		// first entry's start, the log start (was 3, where epoch 1
		// started below the log start).
		{"retention: epoch trimmed away", "r", 0, 4, 0, -1, answer{0, 0, 4}},
		{"delete-records: epoch trimmed away", "r", 1, 4, 0, -1, answer{0, 0, 7}},
		{"delete-records: epoch cut by it", "r", 1, 4, 1, -1, answer{0, 1, 7}}, // was (1, 6)
		{"delete-records to the end: every epoch", "r", 2, 4, 2, -1, answer{0, 2, 10}},
		// Inside: the largest epoch at or below, ending where the next
		// starts.
		{"retention: first kept epoch", "r", 0, 4, 1, -1, answer{0, 1, 6}},
		{"retention: inside", "r", 0, 4, 2, -1, answer{0, 2, 8}},
		{"retention: a gap in the lineage", "r", 0, 4, 3, -1, answer{0, 2, 8}},
		{"delete-records: inside", "r", 1, 4, 3, -1, answer{0, 2, 8}},
		// The latest: the high watermark.
		{"retention: latest", "r", 0, 4, 4, -1, answer{0, 4, 10}},
		{"delete-records to the end: latest", "r", 2, 4, 4, -1, answer{0, 4, 10}},
		{"open transaction: latest", "x", 0, 4, 1, -1, answer{0, 1, 6}},
		// Above the latest, or UNDEFINED_EPOCH.
		{"above the latest", "r", 0, 4, 5, -1, undefined},
		{"undefined epoch", "r", 0, 4, -1, -1, undefined},
		// current_leader_epoch (v2+).
		{"current epoch", "r", 0, 4, 2, 4, answer{0, 2, 8}},
		{"fenced epoch", "r", 0, 4, 2, 3, answer{kerr.FencedLeaderEpoch.Code, -1, -1}},
		{"unknown epoch", "r", 0, 4, 2, 5, answer{kerr.UnknownLeaderEpoch.Code, -1, -1}},
		{"current epoch unchecked before v2", "r", 0, 1, 2, 3, answer{0, 2, 8}},
		{"v0: no epoch in the answer", "r", 0, 0, 0, -1, answer{0, -1, 4}},
		{"unknown partition", "r", 9, 4, 2, -1, answer{kerr.UnknownTopicOrPartition.Code, -1, -1}},
	} {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.Version, r.ReplicaID = tc.version, -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = tc.topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.CurrentLeaderEpoch = tc.p, tc.requested, tc.current
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		p := rc.roundTrip(r).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		if got := (answer{p.ErrorCode, p.LeaderEpoch, p.EndOffset}); got != tc.want {
			t.Errorf("%s (%s-%d v%d, epoch %d): got %+v, want %+v", tc.name, tc.topic, tc.p, tc.version, tc.requested, got, tc.want)
		}
	}
}

func TestTruncateFromStart(t *testing.T) {
	lineage := []EpochEntry{{0, 0}, {1, 3}, {2, 6}, {4, 8}}
	for _, tc := range []struct {
		start int64
		want  []EpochEntry
	}{
		{0, lineage},
		{2, []EpochEntry{{0, 2}, {1, 3}, {2, 6}, {4, 8}}},
		{3, []EpochEntry{{1, 3}, {2, 6}, {4, 8}}}, // exclusive: keeps the entry at 3
		{7, []EpochEntry{{2, 7}, {4, 8}}},
		{12, []EpochEntry{{4, 12}}},
	} {
		got := truncateFromStart(lineage, tc.start)
		if len(got) != len(tc.want) {
			t.Fatalf("truncateFromStart(%d) = %v, want %v", tc.start, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("truncateFromStart(%d) = %v, want %v", tc.start, got, tc.want)
			}
		}
	}
	if got := truncateFromStart([]EpochEntry{{3, 5}}, 2); len(got) != 1 || got[0] != (EpochEntry{3, 5}) {
		t.Fatalf("a lineage starting after the log start changed: %v", got)
	}
	if got := truncateFromStart(nil, 2); len(got) != 0 {
		t.Fatalf("empty lineage: %v", got)
	}
	if lineage[0] != (EpochEntry{0, 0}) {
		t.Fatal("truncateFromStart changed its argument")
	}
	// epochForOffset: the first entry starting exactly there wins.
	if e := epochForOffset([]EpochEntry{{1, 5}, {2, 5}, {3, 9}}, 5); e != 1 {
		t.Fatalf("epochForOffset at a shared start = %d, want 1", e)
	}
}
