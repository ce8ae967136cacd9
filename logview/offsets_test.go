package logview

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/seglog"
)

// writeEpochLog writes 300 records of 20 KB (about six one-MiB segments)
// under leader epochs 0 (offsets 0-99), 2 (100-199) and 5 (200-299), with
// timestamps 1_000_000 + 10*offset except offset 150 (1_002_600, after its successors') and
// offset 295 (9_000_000, the largest); offsets 290-299 are producer 9's
// transaction, left open, in the active segment.
func writeEpochLog(t *testing.T, dir string) {
	t.Helper()
	for _, ep := range []struct {
		epoch    int32
		from, to int64
	}{{0, 0, 100}, {2, 100, 200}, {5, 200, 300}} {
		cfg := seglog.DefaultConfig()
		cfg.SegmentBytes, cfg.LeaderEpoch = seglog.MinSegmentBytes, ep.epoch
		l, err := seglog.Open(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := ep.from; i < ep.to; i++ {
			ts := 1_000_000 + i*10
			switch i {
			case 150:
				ts = 1_002_600
			case 295:
				ts = 9_000_000
			}
			rec := seglog.Record{Key: []byte(fmt.Sprint(i)), Value: val(i), Timestamp: ts}
			if i >= 290 {
				_, err = l.AppendTransactional(9, 0, rec)
			} else {
				_, err = l.Append(rec)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// serve runs a listener over v until the test ends and returns a client
// of it.
func serve(t *testing.T, v *View) *kgo.Client {
	t.Helper()
	cfg := listener.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	srv, err := listener.New(cfg, v)
	lis, lerr := net.Listen("tcp", cfg.Listen)
	if err = errors.Join(err, lerr); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ctx, lis) }()
	t.Cleanup(func() { stop(); <-served })
	cl, err := kgo.NewClient(kgo.SeedBrokers(lis.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestOffsetsRulesAcrossTiers serves writeEpochLog through the listener
// with its log start moved: by delete-records to 130 (inside epoch 2,
// below a local segment's base), tiered with local retention so the log
// spans both tiers, and local only (the log start from
// log-start-offset-checkpoint); and by retention.bytes to a segment base
// inside epoch 2. Every ListOffsets and OffsetForLeaderEpoch answer is
// what Kafka's rules give for the lineage 0@0 2@100 5@200 trimmed to the
// log start, the high watermark 300 and the last stable offset 290.
func TestOffsetsRulesAcrossTiers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prep   func(r *rig)
		tiered bool
		start  int64 // -1: a segment base in (100, 200)
	}{
		{"delete-records, tiered", func(r *rig) { r.tier(2 << 20) }, true, 130},
		{"delete-records, local only", func(*rig) {}, false, 130},
		{"retention", func(r *rig) { r.tierRetaining(2<<20, 3<<20) }, true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			writeEpochLog(t, filepath.Join(r.logDir, "t-0"))
			if tc.start >= 0 {
				writeCheckpoint(t, filepath.Join(r.logDir, "log-start-offset-checkpoint"), fmt.Sprintf("0\n1\nt 0 %d\n", tc.start))
			}
			tc.prep(r)
			tp := listener.TopicPartition{Topic: "t", Partition: 0}
			o, err := r.view.Offsets(context.Background(), tp)
			if err != nil {
				t.Fatal(err)
			}
			s := o.LogStartOffset
			if (tc.start >= 0 && s != tc.start) || (tc.start < 0 && (s <= 100 || s >= 200)) ||
				o.HighWatermark != 300 || o.LastStableOffset != 290 || o.LeaderEpoch != 5 ||
				(tc.tiered && (o.HighestTieredOffset < 200 || o.LocalLogStartOffset <= s)) || (!tc.tiered && o.HighestTieredOffset != -1) {
				t.Fatalf("offsets %+v", o)
			}
			t.Logf("offsets %+v", o)
			checkRules(t, serve(t, r.view), o)
		})
	}
}

// epochAt is the epoch writeEpochLog wrote offset at under.
func epochAt(at int64) int32 {
	switch {
	case at < 100:
		return 0
	case at < 200:
		return 2
	}
	return 5
}

// tsAt is the timestamp writeEpochLog gave offset at.
func tsAt(at int64) int64 {
	switch at {
	case 150:
		return 1_002_600
	case 295:
		return 9_000_000
	}
	return 1_000_000 + at*10
}

func checkRules(t *testing.T, cl *kgo.Client, o listener.Offsets) {
	t.Helper()
	ctx := context.Background()
	type lo struct {
		offset, ts int64
		epoch      int32
	}
	none := lo{-1, -1, -1}
	s := o.LogStartOffset
	at := func(off int64) lo { return lo{off, tsAt(off), epochAt(off)} }
	// first is Kafka's timestamp rule over the written records: the first
	// at or after the log start whose timestamp reaches ts, below end.
	first := func(ts, end int64) lo {
		for off := s; off < 300; off++ {
			if tsAt(off) >= ts {
				if off >= end {
					return none
				}
				return at(off)
			}
		}
		return none
	}
	localStart := max(o.LocalLogStartOffset, s)
	tieredWant := none
	if o.HighestTieredOffset >= 0 {
		tieredWant = lo{o.HighestTieredOffset, -1, epochAt(o.HighestTieredOffset)}
	}
	for _, tc := range []struct {
		name string
		iso  int8
		ts   int64
		want lo
	}{
		{"earliest: the epoch at the log start", 0, -2, lo{s, -1, epochAt(s)}}, // was epoch 0
		{"earliest local: not below the log start", 0, -4, lo{localStart, -1, epochAt(localStart)}},
		{"latest", 0, -1, lo{300, -1, 5}},
		{"latest read_committed", 1, -1, lo{290, -1, 5}},
		{"latest tiered", 0, -5, tieredWant},
		{"latest tiered read_committed", 1, -5, tieredWant}, // below the last stable offset
		{"max timestamp", 0, -3, at(295)},
		{"max timestamp in the open transaction, read_committed", 1, -3, none}, // was 289, the largest below 290
		{"timestamp below the log start", 0, 0, at(s)},
		{"timestamp: the first record reaching it", 0, 1_001_600, first(1_001_600, 300)}, // 150 when the log start is below it
		{"timestamp in the local tier", 0, 1_002_605, at(261)},
		{"timestamp in the open transaction", 0, 8_000_001, at(295)},
		{"timestamp in the open transaction, read_committed", 1, 8_000_001, none},
		{"timestamp after every record", 0, 9_000_001, none},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID, req.IsolationLevel = -1, tc.iso
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = tc.ts, 5
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if got := (lo{p.Offset, p.Timestamp, p.LeaderEpoch}); p.ErrorCode != 0 || got != tc.want {
			t.Errorf("%s (v%d, timestamp %d): code %d %+v, want %+v", tc.name, resp.Version, tc.ts, p.ErrorCode, got, tc.want)
		}
	}
	// OffsetForLeaderEpoch over the trimmed lineage: below its first
	// epoch (the one at the log start) the requested epoch ends at the
	// log start (was the next untrimmed entry's start).
	adm := kadm.NewClient(cl)
	type eo struct {
		epoch int32
		end   int64
	}
	for _, tc := range []struct {
		requested int32
		want      eo
	}{
		{0, eo{0, s}}, // trimmed away (was 100)
		{1, eo{1, s}}, // below the first kept epoch (was (0, 100))
		{2, eo{2, 200}},
		{3, eo{2, 200}},
		{4, eo{2, 200}},
		{5, eo{5, 300}}, // the latest: the high watermark
		{6, eo{-1, -1}},
		{-1, eo{-1, -1}},
	} {
		resp, err := adm.OffsetForLeaderEpoch(ctx, kadm.OffsetForLeaderEpochRequest{"t": {0: tc.requested}})
		if err != nil {
			t.Fatal(err)
		}
		p := resp["t"][0]
		if got := (eo{p.LeaderEpoch, p.EndOffset}); p.Err != nil || got != tc.want {
			t.Errorf("OffsetForLeaderEpoch epoch %d: %v %+v, want %+v", tc.requested, p.Err, got, tc.want)
		}
	}
}
