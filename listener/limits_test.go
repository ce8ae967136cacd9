package listener

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// TestMaxConnectionsPerIP: past max.connections.per.ip from one address a
// connection is accepted and closed at once, counted and logged; an
// override in Kafka's form sets another bound for an address; a closed
// connection frees its place.
func TestMaxConnectionsPerIP(t *testing.T) {
	ts := startServer(t, authzLog(t), func(c *Config) { c.MaxConnectionsPerIP = 3 })
	var open []*rawClient
	for i := 0; i < 3; i++ {
		rc := dialRaw(t, ts.addr, "c")
		rc.roundTrip(apiVersions(3))
		open = append(open, rc)
	}
	extra := dialRaw(t, ts.addr, "c")
	extra.expectClosed()
	if ts.closed(reasonMaxConnsIP) != 1 {
		t.Fatalf("max_connections_per_ip closes: %v", ts.closed(reasonMaxConnsIP))
	}
	open[0].c.Close()
	waitFor(t, "the freed place", func() bool {
		rc := dialRaw(t, ts.addr, "c")
		rc.write(rc.frame(apiVersions(3)))
		_, _, err := rc.readFrame()
		rc.c.Close()
		return err == nil
	})

	ov := startServer(t, authzLog(t), func(c *Config) { c.MaxConnectionsPerIPOverrides = "10.9.9.9:100, 127.0.0.1:1" })
	first := dialRaw(t, ov.addr, "c")
	first.roundTrip(apiVersions(3))
	second := dialRaw(t, ov.addr, "c")
	second.expectClosed()
}

// TestClientThatNeverReads: a client that asks for a large Fetch and never
// reads its socket has its connection closed at response.write.timeout.ms,
// long before connections.max.idle.ms, and the response memory it held
// goes back.
func TestClientThatNeverReads(t *testing.T) {
	l := newFakeLog()
	big := bytes.Repeat([]byte("x"), 1<<20)
	for i := int64(0); i < 24; i++ {
		l.appendRaw(t, "big", 0, v2(t, batch.NewParams(i, 0), batch.Record{Value: big, Timestamp: 1}))
	}
	ts := startServer(t, l, func(c *Config) { c.ResponseWriteTimeoutMs = 300 })
	rc := dialRaw(t, ts.addr, "stuck")
	f := kmsg.NewPtrFetchRequest()
	f.Version, f.MaxBytes, f.ReplicaID = 12, 50<<20, -1
	f.Topics = []kmsg.FetchRequestTopic{{Topic: "big", Partitions: []kmsg.FetchRequestTopicPartition{
		{Partition: 0, PartitionMaxBytes: 50 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
	rc.write(rc.frame(f)) // and never read
	waitFor(t, "the stuck client's connection closed", func() bool { return ts.closed(reasonWriteFailed) >= 1 })
	waitFor(t, "its response memory back", func() bool { return testutil.ToFloat64(ts.srv.m.fetchMem) == 0 })
}
