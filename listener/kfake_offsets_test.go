package listener

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// TestOffsetsMatchKfake cross-checks ListOffsets and OffsetForLeaderEpoch
// with kfake, which answers them as a broker without tiered storage does:
// 30 one-record batches under leader epochs 0 (offsets 0-9), 1 (10-19)
// and 3 (20-29; epoch 2 led nothing), offset 17 carrying the largest
// timestamp, then DeleteRecords to 13 (inside epoch 1). tierd serves the
// same records with the lineage as the broker recorded it (from offset 0)
// and the log start moved to 13.
func TestOffsetsMatchKfake(t *testing.T) {
	ctx, kc := newKfake(t, "k")
	cl := newKgo(t, kc.ListenAddrs()[0], kgo.DefaultProduceTopic("k"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	tsOf := func(o int64) int64 {
		if o == 17 {
			return 5000
		}
		return 1000 + 10*o
	}
	for o := int64(0); o < 30; o++ {
		switch o {
		case 10:
			if err := kc.MoveTopicPartition("k", 0, 0); err != nil { // epoch 1
				t.Fatal(err)
			}
		case 20:
			for i := 0; i < 2; i++ { // epoch 3
				if err := kc.MoveTopicPartition("k", 0, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := &kgo.Record{Value: []byte("v"), Timestamp: time.UnixMilli(tsOf(o))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", o, err)
		}
	}
	// tierd's copy: the records as kfake stored them, the lineage from
	// their batches' leader epochs.
	l := newFakeLog()
	consumer := newKgo(t, kc.ListenAddrs()[0], kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"k": {0: kgo.NewOffset().At(0)}}))
	var lineage []EpochEntry
	for n := 0; n < 30; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			l.appendRaw(t, "k", 0, v2(t, batch.NewParams(r.Offset, r.LeaderEpoch), rec("", "v", r.Timestamp.UnixMilli())))
			if len(lineage) == 0 || lineage[len(lineage)-1].Epoch != r.LeaderEpoch {
				lineage = append(lineage, EpochEntry{r.LeaderEpoch, r.Offset})
			}
			n++
		})
	}
	if len(lineage) != 3 || lineage[2] != (EpochEntry{3, 20}) {
		t.Fatalf("lineage %v, want 0@0 1@10 3@20", lineage)
	}
	dr, err := kadm.NewClient(cl).DeleteRecords(ctx, kadm.Offsets{"k": {0: {Topic: "k", Partition: 0, At: 13}}})
	if err != nil || dr.Error() != nil {
		t.Fatalf("delete records: %v %v", err, dr.Error())
	}
	l.set("k", 0, func(p *fakePart) { p.logStart, p.localStart, p.epochs = 13, 13, lineage })
	ts := startServer(t, l, nil)
	tc := newKgo(t, ts.addr)

	for _, timestamp := range []int64{-1, -2, -3, -4, -5, 0, 1100, 1131, 1171, 1175, 1290, 5000, 5001} {
		k, d := listOffset(ctx, t, cl, "k", 0, timestamp, 3), listOffset(ctx, t, tc, "k", 0, timestamp, 3)
		if k.ErrorCode != d.ErrorCode || k.Offset != d.Offset || k.Timestamp != d.Timestamp || k.LeaderEpoch != d.LeaderEpoch {
			t.Errorf("ListOffsets timestamp %d: kfake (code %d, offset %d, timestamp %d, epoch %d), tierd (code %d, offset %d, timestamp %d, epoch %d)",
				timestamp, k.ErrorCode, k.Offset, k.Timestamp, k.LeaderEpoch, d.ErrorCode, d.Offset, d.Timestamp, d.LeaderEpoch)
		}
	}
	if p := listOffset(ctx, t, tc, "k", 0, -2, 3); p.Offset != 13 || p.LeaderEpoch != 1 {
		t.Fatalf("tierd earliest: %+v, want offset 13 in epoch 1", p)
	}
	// Epoch -1 is left out: kfake answers it like an epoch below the
	// lineage (-1 and the log start), where Kafka's endOffsetFor answers
	// UNDEFINED_EPOCH_OFFSET (TestOffsetForLeaderEpochRules checks tierd's).
	for epoch := int32(0); epoch <= 4; epoch++ {
		k, d := epochEnd(ctx, t, cl, "k", epoch), epochEnd(ctx, t, tc, "k", epoch)
		if k.Err != nil || d.Err != nil || k.LeaderEpoch != d.LeaderEpoch || k.EndOffset != d.EndOffset {
			t.Errorf("OffsetForLeaderEpoch epoch %d: kfake (%v, %d, %d), tierd (%v, %d, %d)",
				epoch, k.Err, k.LeaderEpoch, k.EndOffset, d.Err, d.LeaderEpoch, d.EndOffset)
		}
	}
	if p := epochEnd(ctx, t, tc, "k", 0); p.LeaderEpoch != 0 || p.EndOffset != 13 {
		t.Fatalf("tierd epoch 0: %+v, want it to end at the log start", p)
	}
}

// TestOffsetsMatchKfakeOpenTransaction cross-checks ListOffsets with
// kfake while a transaction is open: offsets 0-4 plain (timestamps
// 1000-1040), 5-7 producer x's transaction, left open (timestamps 9000,
// 9001 and 1100), so the last stable offset 5 is below the high
// watermark 8 and the largest timestamp lies past it.
func TestOffsetsMatchKfakeOpenTransaction(t *testing.T) {
	ctx, kc := newKfake(t, "kx")
	opts := []kgo.Opt{kgo.DefaultProduceTopic("kx"), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	plain := newKgo(t, kc.ListenAddrs()[0], opts...)
	for o := int64(0); o < 5; o++ {
		if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Timestamp: time.UnixMilli(1000 + 10*o)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txn := newKgo(t, kc.ListenAddrs()[0], append(opts, kgo.TransactionalID("x"))...)
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, ms := range []int64{9000, 9001, 1100} {
		if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("t"), Timestamp: time.UnixMilli(ms)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	l := newFakeLog()
	consumer := newKgo(t, kc.ListenAddrs()[0], kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kx": {0: kgo.NewOffset().At(0)}}))
	for n := 0; n < 8; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			p := batch.NewParams(r.Offset, r.LeaderEpoch)
			if r.Attrs.IsTransactional() {
				p = txnParams(r.Offset, r.LeaderEpoch, r.ProducerID)
			}
			l.appendRaw(t, "kx", 0, v2(t, p, rec("", string(r.Value), r.Timestamp.UnixMilli())))
			n++
		})
	}
	l.set("kx", 0, func(p *fakePart) { p.lso, p.epochs = 5, []EpochEntry{{0, 0}} })
	ts := startServer(t, l, nil)
	tc := newKgo(t, ts.addr)
	for _, iso := range []int8{0, 1} {
		for _, timestamp := range []int64{-1, -2, -3, 0, 1040, 1041, 1100, 9000, 9001, 9002} {
			k, d := listOffset(ctx, t, plain, "kx", iso, timestamp, 0), listOffset(ctx, t, tc, "kx", iso, timestamp, 0)
			if k.ErrorCode != d.ErrorCode || k.Offset != d.Offset || k.Timestamp != d.Timestamp || k.LeaderEpoch != d.LeaderEpoch {
				t.Errorf("ListOffsets isolation %d timestamp %d: kfake (code %d, offset %d, timestamp %d, epoch %d), tierd (code %d, offset %d, timestamp %d, epoch %d)",
					iso, timestamp, k.ErrorCode, k.Offset, k.Timestamp, k.LeaderEpoch, d.ErrorCode, d.Offset, d.Timestamp, d.LeaderEpoch)
			}
		}
	}
	if p := listOffset(ctx, t, tc, "kx", 1, -1, 0); p.Offset != 5 {
		t.Fatalf("tierd latest read_committed: %+v, want the last stable offset 5", p)
	}
}

// newKfake starts a one-broker kfake cluster holding topic (one
// partition) for the test, and a context bounding the test's requests.
func newKfake(t *testing.T, topic string) (context.Context, *kfake.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return ctx, kc
}

// listOffset sends one ListOffsets for partition 0 of topic (a consumer's,
// at the version cl picks).
func listOffset(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, iso int8, timestamp int64, current int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := listOffsets(9, iso, lop(0, timestamp, current))
	req.Topics[0].Topic = topic
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// epochEnd asks kadm for the end of epoch in partition 0 of topic.
func epochEnd(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, epoch int32) kadm.OffsetForLeaderEpoch {
	t.Helper()
	resp, err := kadm.NewClient(cl).OffsetForLeaderEpoch(ctx, kadm.OffsetForLeaderEpochRequest{topic: {0: epoch}})
	if err != nil {
		t.Fatal(err)
	}
	return resp[topic][0]
}
