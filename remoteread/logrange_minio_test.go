package remoteread

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/rsm"
)

// WriteLogRange over a real MinIO, reading a real Kafka broker's .log
// (iechenyb-2019-plain string-key-0, 2 MB, see the fixtures' PROVENANCE)
// stored under another prefix, as the RSM endpoint keeps the broker's
// copies, through an rsm.Manager of that prefix: many ranges byte for
// byte (the object's end and n past it too), the plugin's windows read
// ahead at most 1.2 bytes fetched per byte served, 8 readers at once,
// and a missing object.
func TestWriteLogRangeMinIO(t *testing.T) {
	logFile := testfixtures.Path(t, "iechenyb-2019-plain", "kafka-logs", "string-key-0", "00000000000000000000.log")
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	b := readtest.MinIOBucket(t, "broker")
	mgr, err := rsm.NewManager(b, rsm.Config{Prefix: "_kafka-rsm"})
	if err != nil {
		t.Fatal(err)
	}
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "string-key", Partition: 0}, ID: remotelog.NewSegmentID(),
		SizeInBytes: int64(len(data))}
	if err := b.Upload(context.Background(), mgr.Key(meta, kafkalog.LogSuffix), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	e := newEnv(t, logRangeConfig(), WithRegisterer(reg))
	size := int64(len(data))
	const cb = 64 << 10
	for _, r := range [][2]int64{{0, 1}, {0, size}, {cb - 7, 20}, {size - 1, 1}, {size - 100, math.MaxInt64}, {size - 5, 5000}, {size, 10}} {
		writeRange(t, e.eng, mgr, meta, data, r[0], r[1])
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for range 50 {
		writeRange(t, e.eng, mgr, meta, data, rng.Int64N(size+1), rng.Int64N(3*cb))
	}

	e.eng.DropCaches(true)
	gets := readtest.MetricValue(t, reg, "tierd_fetch_log_gets_total")
	windows := 0
	ratio := fetchedPerServed(t, e, reg, func() {
		pluginWindows(t, e.eng, mgr, meta, data, 0, size, 16<<10, 128<<10, func(int64) { windows++ })
	})
	t.Logf("plugin windows over MinIO: %d windows, %v GETs, %.3f bytes fetched per byte served", windows, readtest.MetricValue(t, reg, "tierd_fetch_log_gets_total")-gets, ratio)
	if ratio > 1.2 || readtest.MetricValue(t, reg, "tierd_cache_prefetches_total") == 0 {
		t.Errorf("plugin windows over MinIO: %.3f bytes fetched per byte served, %v prefetches; want <= 1.2 and read-ahead", ratio, readtest.MetricValue(t, reg, "tierd_cache_prefetches_total"))
	}

	e.eng.DropCaches(true)
	ratio = fetchedPerServed(t, e, reg, func() {
		var wg sync.WaitGroup
		for i := range int64(8) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				from := i * size / 8
				pluginWindows(t, e.eng, mgr, meta, data, from, (i+1)*size/8, 16<<10, 128<<10, nil)
			}()
		}
		wg.Wait()
	})
	t.Logf("8 concurrent readers over MinIO: %.3f bytes fetched per byte served", ratio)
	if ratio > 1.2 {
		t.Errorf("8 concurrent readers over MinIO: %.3f bytes fetched per byte served, want <= 1.2", ratio)
	}

	gone := meta
	gone.ID = remotelog.NewSegmentID()
	if n, err := e.eng.WriteLogRange(context.Background(), mgr, gone, 0, 100, io.Discard); !errors.Is(err, rsm.ErrNotFound) || n != 0 {
		t.Errorf("missing object: %d bytes, %v; want rsm.ErrNotFound", n, err)
	}
	if p := e.eng.Cache().Pinned(); p != 0 {
		t.Fatalf("%d pins left", p)
	}
}
