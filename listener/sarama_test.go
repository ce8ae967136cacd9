package listener

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// TestSaramaReadsFromOldest: sarama's partition consumer, with its own
// defaults, reads a gzip fixture partition and __consumer_offsets 8 and 17
// (the other numbers missing) from the oldest offset, record by record.
func TestSaramaReadsFromOldest(t *testing.T) {
	t.Parallel()
	l, want := offsetsTopicLog(t)
	gz := TopicPartition{"gzip", 1}
	gzWant := servePartitionLog(t, l, gz, testfixtures.Path(t, "berkay-kafkajs-gzip", "kafka-data", "topic-logx-001-1", "00000000000000000000.log"))
	ts := startServer(t, l, nil)

	cfg := sarama.NewConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	c, err := sarama.NewConsumer([]string{ts.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check := func(tp TopicPartition, want []batch.Record) {
		pc, err := c.ConsumePartition(tp.Topic, tp.Partition, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("%s: %v", tp, err)
		}
		defer pc.Close()
		guard := time.NewTimer(30 * time.Second)
		defer guard.Stop()
		for i, w := range want {
			select {
			case m := <-pc.Messages():
				if m.Offset != w.Offset || !sameBytes(m.Key, w.Key) || !sameBytes(m.Value, w.Value) || m.Timestamp.UnixMilli() != w.Timestamp {
					t.Fatalf("%s record %d: offset %d key %q value %q ts %d, want %+v", tp, i, m.Offset, m.Key, m.Value,
						m.Timestamp.UnixMilli(), w)
				}
				if len(m.Headers) != len(w.Headers) {
					t.Fatalf("%s offset %d: %d headers, want %d", tp, m.Offset, len(m.Headers), len(w.Headers))
				}
			case err := <-pc.Errors():
				t.Fatalf("%s: %v", tp, err)
			case <-guard.C:
				t.Fatalf("%s: %d of %d records", tp, i, len(want))
			}
		}
	}
	check(gz, gzWant)
	for _, p := range []int32{8, 17} {
		check(TopicPartition{"__consumer_offsets", p}, want[p])
	}
}
