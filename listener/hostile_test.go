package listener

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchLongPollClientGone: a client that closes its connection while
// its Fetch long-polls (max_wait_ms far beyond the test) frees the
// connection and the poll at once, instead of at max_wait_ms; the close is
// counted as the client's.
func TestFetchLongPollClientGone(t *testing.T) {
	ts := startServer(t, smallLog(t), nil)
	for i := 0; i < 3; i++ {
		rc := dialRaw(t, ts.addr, "gone")
		long := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, minBytes: 1, maxWait: 1<<31 - 1, topic: "t", offsets: map[int32]int64{0: 6}}
		rc.write(rc.frame(long.build()))
		waitFor(t, "the fetch to wait", func() bool { return strings.Contains(goroutines(), "longPoll") })
		rc.c.Close()
		waitFor(t, "the long poll to end", func() bool { return !strings.Contains(goroutines(), "longPoll") })
	}
	waitFor(t, "the connections to close", func() bool { return testutil.ToFloat64(ts.srv.m.conns) == 0 })
	if got := ts.closed(reasonClient); got != 3 {
		t.Fatalf("closed by the client: %v, want 3", got)
	}
	// The listener still answers.
	rc := dialRaw(t, ts.addr, "after")
	short := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, minBytes: 1, maxWait: 10, topic: "t", offsets: map[int32]int64{0: 0}}
	if p := rc.roundTrip(short.build()).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("after the closed long polls: %+v", p)
	}
}

// TestFetchLongPollPipelined: a request pipelined behind a long-polling
// Fetch is not mistaken for a closed connection: the poll runs to
// max_wait_ms, then both are answered in order.
func TestFetchLongPollPipelined(t *testing.T) {
	ts := startServer(t, smallLog(t), func(c *Config) { c.FetchPollIntervalMs = 5 })
	rc := dialRaw(t, ts.addr, "pipe")
	long := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, minBytes: 1, maxWait: 300, topic: "t", offsets: map[int32]int64{0: 6}}
	rc.write(append(rc.frame(long.build()), rc.frame(apiVersions(3))...))
	for _, want := range []int32{1, 2} {
		corr, _, err := rc.readFrame()
		if err != nil || corr != want {
			t.Fatalf("got corr %d (%v), want %d", corr, err, want)
		}
	}
	if got := ts.closed(reasonClient); got != 0 {
		t.Fatalf("closed by the client: %v", got)
	}
}
