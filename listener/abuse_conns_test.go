package listener

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// raiseFileLimit makes sure the process may open want file descriptors,
// raising its soft limit (and putting it back when the test ends), or
// skips the test when the hard limit is lower.
func raiseFileLimit(t *testing.T, want uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot read the open files limit: %v", err)
	}
	if lim.Cur >= want {
		return
	}
	if lim.Max < want {
		t.Skipf("this test opens about %d files; the open files limit is %d (hard %d): raise ulimit -n", want, lim.Cur, lim.Max)
	}
	old := lim
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("this test opens about %d files; raising the open files limit from %d: %v", want, old.Cur, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// apiVersionsOK sends ApiVersions on nc and reports whether an answer
// came (false: the server closed the connection). An error: neither,
// within 20 s.
func apiVersionsOK(rc *rawClient) (bool, error) {
	if _, err := rc.c.Write(rc.frame(apiVersions(3))); err != nil {
		return false, nil // the server closed it (EPIPE, reset)
	}
	_, _, err := rc.readFrame()
	if err == nil {
		return true, nil
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, err
	}
	return false, nil
}

// TestMaxConnectionsPerIPAtScale: 1,000 connections from 127.0.0.1 with
// max.connections.per.ip 100 (and max.connections far above): exactly 100
// stay open and answer ApiVersions, before and after the flood; the 900
// others are closed by the server, counted as max_connections_per_ip
// (900) and logged once; once the 100 are closed, 100 new connections
// are admitted and the 101st is refused again.
func TestMaxConnectionsPerIPAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections: not in -short")
	}
	const (
		conns = 1000
		limit = 100
	)
	raiseFileLimit(t, 2*conns+500) // the client's ends, the server's, and the rest
	ts := startServer(t, authzLog(t), func(c *Config) { c.MaxConnectionsPerIP, c.MaxConnections = limit, 10*conns })

	all := make([]*rawClient, conns)
	for i := range all {
		all[i] = dialRaw(t, ts.addr, "flood")
	}
	var open []*rawClient
	for _, rc := range all {
		ok, err := apiVersionsOK(rc)
		if err != nil {
			t.Fatalf("connection %s: %v", rc.c.LocalAddr(), err)
		}
		if ok {
			open = append(open, rc)
		} else {
			rc.c.Close()
		}
	}
	if len(open) != limit {
		t.Fatalf("%d of %d connections answered, want max.connections.per.ip (%d)", len(open), conns, limit)
	}
	waitFor(t, "every refused connection counted", func() bool { return ts.closed(reasonMaxConnsIP) >= conns-limit })
	if v := ts.closed(reasonMaxConnsIP); v != conns-limit {
		t.Errorf("max_connections_per_ip closes %v, want %d", v, conns-limit)
	}
	if v := testutil.ToFloat64(ts.srv.m.conns); v != limit {
		t.Errorf("tierd_kafka_connections %v, want %d", v, limit)
	}
	if n := strings.Count(ts.logs.String(), "max.connections.per.ip open from its address"); n != 1 {
		t.Errorf("the refusals logged %d times, want once for the address", n)
	}
	for _, rc := range open { // still usable after the flood
		rc.roundTrip(apiVersions(3))
		rc.c.Close()
	}

	waitFor(t, "the 100 closed connections dropped", func() bool { return testutil.ToFloat64(ts.srv.m.conns) == 0 })
	for range limit {
		dialRaw(t, ts.addr, "again").roundTrip(apiVersions(3))
	}
	dialRaw(t, ts.addr, "again").expectClosed()
	waitFor(t, "the refusal counted", func() bool { return ts.closed(reasonMaxConnsIP) >= conns-limit+1 })
}

// dialSmallWindow connects to addr with a 16 KiB receive buffer, set
// before the connection opens, so that the client's window stays small
// while it does not read.
func dialSmallWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		}); err != nil {
			return err
		}
		return serr
	}}
	nc, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// TestManyClientsThatNeverRead: 20 clients at once ask for a Fetch of
// about 7 MiB each (more than the socket buffers hold) and do not read.
// Asserted: every Fetch got its response memory without waiting; all 20
// connections are closed at response.write.timeout.ms (write_failed,
// exactly 20), each client having received only part of its response
// before the close; and the Fetch memory they held is back to 0.
func TestManyClientsThatNeverRead(t *testing.T) {
	if testing.Short() {
		t.Skip("20 responses of 7 MiB: not in -short")
	}
	const (
		clients = 20
		max     = 8 << 20
	)
	l := newFakeLog()
	big := bytes.Repeat([]byte("x"), 1<<20)
	for i := int64(0); i < 8; i++ {
		l.appendRaw(t, "big", 0, v2(t, batch.NewParams(i, 0), batch.Record{Value: big, Timestamp: 1}))
	}
	ts := startServer(t, l, func(c *Config) {
		c.ResponseWriteTimeoutMs = 300
		c.FetchResponseMemoryBytes = clients*2*max + 1<<20
	})
	f := kmsg.NewPtrFetchRequest()
	f.Version, f.MaxBytes, f.ReplicaID = 12, max, -1
	f.Topics = []kmsg.FetchRequestTopic{{Topic: "big", Partitions: []kmsg.FetchRequestTopicPartition{
		{Partition: 0, PartitionMaxBytes: max, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
	var stuck []*rawClient
	for range clients {
		rc := &rawClient{t: t, c: dialSmallWindow(t, ts.addr), id: "stuck"}
		rc.write(rc.frame(f)) // and read nothing
		stuck = append(stuck, rc)
	}
	waitFor(t, "every stuck connection closed", func() bool { return ts.closed(reasonWriteFailed) >= clients })
	if v := ts.closed(reasonWriteFailed); v != clients {
		t.Errorf("write_failed closes %v, want %d", v, clients)
	}
	waitFor(t, "the response memory back", func() bool { return testutil.ToFloat64(ts.srv.m.fetchMem) == 0 })
	for _, o := range []string{"granted", "denied"} {
		if v := testutil.ToFloat64(ts.srv.m.fetchMemWaits.WithLabelValues(o)); v != 0 {
			t.Errorf("%v Fetches waited for memory (%s); every stuck client should have held its own", v, o)
		}
	}

	var wg sync.WaitGroup
	got := make([]int64, clients)
	sizes := make([]int64, clients)
	errs := make([]error, clients)
	for i, rc := range stuck {
		wg.Go(func() { // now read: part of a response, then the end
			rc.c.SetReadDeadline(time.Now().Add(20 * time.Second))
			var size [4]byte
			if _, errs[i] = io.ReadFull(rc.c, size[:]); errs[i] != nil {
				return
			}
			sizes[i] = int64(binary.BigEndian.Uint32(size[:]))
			got[i], errs[i] = io.Copy(io.Discard, rc.c)
		})
	}
	wg.Wait()
	for i := range stuck {
		var ne net.Error
		switch {
		case errors.As(errs[i], &ne) && ne.Timeout():
			t.Errorf("client %d: the connection still open after %d bytes", i, got[i])
		case sizes[i] < 4<<20 || got[i] >= sizes[i]:
			t.Errorf("client %d: %d bytes of a %d-byte response before the close (%v); want a large response cut off", i, got[i], sizes[i], errs[i])
		}
	}
}
