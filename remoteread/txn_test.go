package remoteread

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/rsm"
)

func pairs(txns []index.AbortedTxn) [][2]int64 {
	out := [][2]int64{}
	for _, x := range txns {
		out = append(out, [2]int64{x.ProducerID, x.FirstOffset})
	}
	return out
}

// Aborted transactions come from the copies' transaction indexes: those
// overlapping [from, to), found in the copy holding from and the copies
// after it until an entry's last stable offset reaches to; a copy without
// a transaction index makes no GET; parsed indexes are cached.
func TestRemoteAbortedTxns(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, DefaultConfig(), WithRegisterer(reg))
	readtest.TxnLog(t, e.Rig)
	ctx := context.Background()
	txnGets := func() int64 { return e.Bucket.TxnGets.Load() }
	indexGets := func() float64 { return readtest.MetricValue(t, reg, "tierd_fetch_index_gets_total") }
	for _, tc := range []struct {
		from, to  int64
		want      [][2]int64 // producer id, first offset
		gets      int64      // .txnindex GETs, cold
		indexGets float64
	}{
		// Copy [20, 29] has no transaction index: only [30, 39]'s is read.
		{20, 35, [][2]int64{{10, 30}}, 1, 1},
		// pid 8's abort marker is in the next copy: it is read too, and
		// its entry's LSO 13 >= 10 ends the search.
		{0, 10, [][2]int64{{7, 2}, {8, 7}}, 2, 2},
		{7, 8, [][2]int64{{8, 7}}, 0, 0},
		{12, 13, [][2]int64{{8, 7}}, 0, 0},
		{16, 30, [][2]int64{}, 0, 0},
		{0, 40, [][2]int64{{7, 2}, {8, 7}, {10, 30}}, 0, 0},
		{40, 50, [][2]int64{}, 0, 0},
		{5, 5, [][2]int64{}, 0, 0},
	} {
		g, ig := txnGets(), indexGets()
		txns, err := e.eng.RemoteAbortedTxns(ctx, e.TP, tc.from, tc.to)
		if err != nil {
			t.Fatalf("RemoteAbortedTxns(%d, %d): %v", tc.from, tc.to, err)
		}
		if got := pairs(txns); len(got) != len(tc.want) || (len(got) > 0 && !equalPairs(got, tc.want)) {
			t.Errorf("RemoteAbortedTxns(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
		if n, in := txnGets()-g, indexGets()-ig; n != tc.gets || in != tc.indexGets {
			t.Errorf("RemoteAbortedTxns(%d, %d): %d .txnindex GETs, %v index loads; want %d, %v", tc.from, tc.to, n, in, tc.gets, tc.indexGets)
		}
	}
	fin, _ := e.Store.FinishedSegments(e.TP)
	if txns, _ := e.eng.RemoteAbortedTxns(ctx, e.TP, 0, 10); txns[0].LastOffset != 6 || txns[1].LastOffset != 12 || txns[1].LastStableOffset != 13 {
		t.Errorf("entries %+v", txns)
	}
	if _, err := e.eng.RemoteAbortedTxns(ctx, e.TP, -1, 10); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative from: %v", err)
	}
	if _, err := e.eng.RemoteAbortedTxns(ctx, remotelog.TopicPartition{Topic: "x"}, 0, 10); !errors.Is(err, ErrNotTiered) {
		t.Errorf("unknown partition: %v", err)
	}
	// A finished copy's transaction index gone: data loss.
	e.eng.DropCaches(true)
	if err := e.Bucket.Delete(ctx, e.Mgr.Key(fin[3], kafkalog.TxnIndexSuffix)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.RemoteAbortedTxns(ctx, e.TP, 30, 31); !errors.Is(err, ErrDataLoss) || !errors.Is(err, rsm.ErrNotFound) {
		t.Errorf("missing .txnindex: %v", err)
	}
}

func equalPairs(a, b [][2]int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The lineage merges the copies' epochs: ascending, each epoch once at
// the smallest start offset seen.
func TestRemoteLeaderEpochs(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ts := func(off int64) int64 { return off }
	for base := int64(0); base <= 30; base += 10 {
		if base == 30 {
			readtest.WriteSegment(t, dir, base, nil)
			break
		}
		readtest.WriteSegment(t, dir, base, nil, readtest.Entry(t, base, 10, -1, ts))
	}
	epochs := map[int64][]epoch.Entry{
		0:  {{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 4}},
		10: {{Epoch: 1, StartOffset: 10}, {Epoch: 3, StartOffset: 15}},
		20: {{Epoch: 3, StartOffset: 20}, {Epoch: 5, StartOffset: 27}},
	}
	e.TierEach(dir, func(meta *remotelog.SegmentMetadata, files *rsm.SegmentFiles) {
		meta.SegmentLeaderEpochs = epochs[meta.StartOffset]
		files.LeaderEpochs = epochs[meta.StartOffset]
	})
	got, err := e.eng.RemoteLeaderEpochs(context.Background(), e.TP)
	want := []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 4}, {Epoch: 3, StartOffset: 15}, {Epoch: 5, StartOffset: 27}}
	if err != nil || len(got) != len(want) {
		t.Fatalf("RemoteLeaderEpochs = %v %v, want %v", got, err, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("RemoteLeaderEpochs = %v, want %v", got, want)
		}
	}
	if _, err := e.eng.RemoteLeaderEpochs(context.Background(), remotelog.TopicPartition{Topic: "x"}); !errors.Is(err, ErrNotTiered) {
		t.Errorf("unknown partition: %v", err)
	}
}
