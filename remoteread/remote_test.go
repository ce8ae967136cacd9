package remoteread

import (
	"context"
	"errors"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
)

// upfrontEnd: the segment's end when within max_bytes, else the last
// indexed batch start within max_bytes of pos, else pos.
func TestUpfrontEnd(t *testing.T) {
	offsets := []index.OffsetEntry{{Offset: 9, Position: 4000}, {Offset: 19, Position: 9000}, {Offset: 29, Position: 15000}}
	for _, tc := range []struct{ pos, maxBytes, size, want int64 }{
		{0, 20000, 18000, 18000}, // the rest of the segment is within max_bytes
		{0, 10000, 18000, 9000},  // the last indexed start within 10000
		{4000, 10000, 18000, 9000},
		{4000, 4000, 18000, 4000}, // no indexed start after pos within max_bytes
		{0, 0, 18000, 0},
		{9000, 6000, 18000, 15000}, // exactly at an indexed start
	} {
		if got := upfrontEnd(offsets, tc.pos, tc.maxBytes, tc.size); got != tc.want {
			t.Errorf("upfrontEnd(pos %d, max %d, size %d) = %d, want %d", tc.pos, tc.maxBytes, tc.size, got, tc.want)
		}
	}
}

// Past remote.fetch.max.wait.ms without the first batch: ErrStillLoading.
func TestReadRemoteStillLoading(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 50
	cfg.PrefetchBytes = 0
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	gate := make(chan struct{})
	e.Bucket.Gate.Store(&gate)
	t.Cleanup(func() { close(gate) })
	if _, err := e.eng.ReadRemote(context.Background(), e.TP, 500, 1); !errors.Is(err, ErrStillLoading) {
		t.Fatalf("read of a held object: %v, want ErrStillLoading", err)
	}
}

// Partitions and offsets come from the metadata store: a partition
// recorded with nothing tiered is not listed.
func TestRemotePartitionsAndOffsets(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	if err := e.Store.SetTopicID(e.TP, "AAAAAAAAAAAAAAAAAAAAAQ"); err != nil {
		t.Fatal(err)
	}
	empty := remotelog.TopicPartition{Topic: "u", Partition: 3}
	if err := e.Store.EnsurePartition(empty, 42); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ps, err := e.eng.RemotePartitions(ctx)
	if err != nil || len(ps) != 1 || ps[0] != (RemotePartition{TopicPartition: e.TP, TopicID: "AAAAAAAAAAAAAAAAAAAAAQ"}) {
		t.Fatalf("RemotePartitions: %+v %v", ps, err)
	}
	for _, tc := range []struct {
		tp           remotelog.TopicPartition
		ok           bool
		lso, highest int64
	}{{e.TP, true, 0, 599}, {empty, true, 42, -1}, {remotelog.TopicPartition{Topic: "v"}, false, 0, -1}} {
		offs, ok, err := e.eng.RemoteOffsets(ctx, tc.tp)
		if err != nil || ok != tc.ok || offs.LogStartOffset != tc.lso || offs.HighestTieredOffset != tc.highest {
			t.Errorf("RemoteOffsets(%v) = %+v %v %v", tc.tp, offs, ok, err)
		}
	}
}
