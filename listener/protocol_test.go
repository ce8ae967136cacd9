package listener

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// smallLog holds topic "t", partition 0: three batches at offsets 0, 2, 4
// (two records each, epochs 0, 0, 3), timestamps 1000..1005.
func smallLog(t testing.TB) *fakeLog {
	l := newFakeLog()
	for i := int64(0); i < 3; i++ {
		ep := int32(0)
		if i == 2 {
			ep = 3
		}
		l.appendRaw(t, "t", 0, v2(t, batch.NewParams(2*i, ep),
			rec("k", "v"+string(rune('a'+2*i)), 1000+2*i), rec("k", "v"+string(rune('b'+2*i)), 1001+2*i)))
	}
	l.set("t", 0, func(p *fakePart) { p.epochs = []EpochEntry{{0, 0}, {3, 4}} })
	return l
}

func TestApiVersions(t *testing.T) {
	ts := startServer(t, smallLog(t), nil)
	rc := dialRaw(t, ts.addr, "av")
	for v := int16(0); v <= 4; v++ {
		resp := rc.roundTrip(apiVersions(v)).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		want := map[int16][2]int16{0: {3, 13}, 1: {4, 16}, 2: {0, 9}, 3: {0, 12}, 18: {0, 4}, 23: {0, 4}}
		if len(got) != len(want) {
			t.Fatalf("v%d: advertised %v, want %v", v, got, want)
		}
		for k, r := range want {
			if got[k] != r {
				t.Fatalf("v%d: key %d advertised %v, want %v", v, k, got[k], r)
			}
		}
	}
	// KIP-511: a version the listener does not know is answered v0 with
	// UNSUPPORTED_VERSION and the ApiVersions range; the connection stays.
	for _, v := range []int16{5, 127} {
		req := apiVersions(v)
		rc.write(rc.frame(req))
		corr, body, err := rc.readFrame()
		if err != nil || corr != rc.corr {
			t.Fatalf("v%d: corr %d err %v", v, corr, err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: decode as v0: %v", v, err)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 ||
			resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 4 {
			t.Fatalf("v%d: got %+v", v, resp)
		}
	}
	bad := apiVersions(3)
	bad.ClientSoftwareName = "-bad name"
	if resp := rc.roundTrip(bad).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("invalid software name: error %d", resp.ErrorCode)
	}
	if resp := rc.roundTrip(apiVersions(4)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("after fallback: error %d", resp.ErrorCode)
	}
}

// TestBadInput: each bad frame closes its connection, is counted under its
// reason and logged once per client, and other connections are served.
func TestBadInput(t *testing.T) {
	ts := startServer(t, smallLog(t), func(c *Config) {
		c.SocketRequestMaxBytes = 1 << 20
		c.ConnectionsMaxIdleMs = 300
	})
	sized := func(n int32, body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(n)), body...)
	}
	fetch3 := kmsg.NewPtrFetchRequest()
	fetch3.Version = 3
	meta13 := kmsg.NewPtrMetadataRequest()
	meta13.Version = 13
	coord := kmsg.NewPtrFindCoordinatorRequest()
	unknownKey := func(rc *rawClient) []byte {
		f := rc.frame(apiVersions(0))
		binary.BigEndian.PutUint16(f[4:], 999)
		return f
	}
	cases := []struct {
		name, reason string
		frame        func(rc *rawClient) []byte
		logged       string // a log line naming the problem, "" for none
	}{
		{"oversize frame", reasonTooLarge, func(*rawClient) []byte { return sized(1<<20+1, nil) }, "reason=frame_too_large"},
		{"negative size", reasonNegative, func(*rawClient) []byte { return sized(-5, nil) }, "reason=negative_size"},
		{"garbage body", reasonMalformed, func(*rawClient) []byte { return sized(3, []byte{1, 2, 3}) }, "reason=malformed_request"},
		{"garbage fetch body", reasonMalformed, func(rc *rawClient) []byte {
			fr := kmsg.NewPtrFetchRequest()
			fr.Version = 11
			f := rc.frame(fr)
			return sized(int32(len(f)-4+5), append(f[4:len(f)-3], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		}, "reason=malformed_request"},
		{"unknown api key", reasonUnsupported, unknownKey, "unknown API key 999"},
		{"fetch v3", reasonUnsupported, func(rc *rawClient) []byte { return rc.frame(fetch3) }, "Fetch v3 is not served"},
		{"metadata v13", reasonUnsupported, func(rc *rawClient) []byte { return rc.frame(meta13) }, "Metadata v13 is not served"},
		{"unserved api", reasonUnsupported, func(rc *rawClient) []byte { return rc.frame(coord) }, "FindCoordinator v0 is not served"},
		{"half frame then stall", reasonStalled, func(rc *rawClient) []byte { return rc.frame(apiVersions(3))[:9] }, "reason=stalled"},
		{"idle", reasonIdle, func(*rawClient) []byte { return nil }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.closed(tc.reason)
			id := "bad-" + strings.ReplaceAll(tc.name, " ", "-")
			for i := 0; i < 2; i++ { // the same client twice: logged once
				rc := dialRaw(t, ts.addr, id)
				rc.write(tc.frame(rc))
				rc.expectClosed()
			}
			waitFor(t, "close counted", func() bool { return ts.closed(tc.reason) == before+2 })
			if tc.logged != "" {
				// Logged once per client: by client id once the header
				// is read, else by remote host alone.
				who := "client_id=" + id
				if tc.reason == reasonTooLarge || tc.reason == reasonNegative || tc.reason == reasonStalled || tc.name == "garbage body" {
					who = `client_id=""`
				}
				n := 0
				for _, line := range strings.Split(ts.logs.String(), "\n") {
					if strings.Contains(line, tc.logged) && strings.Contains(line, who+" ") && strings.Contains(line, "level=WARN") {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("%q for %s logged %d times, want once:\n%s", tc.logged, who, n, ts.logs.String())
				}
			}
			// The server goes on serving.
			ok := dialRaw(t, ts.addr, "good")
			if resp := ok.roundTrip(apiVersions(4)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
				t.Fatalf("after %s: error %d", tc.name, resp.ErrorCode)
			}
		})
	}
	if v := testutil.ToFloat64(ts.srv.m.requests.WithLabelValues(apiOther, "")); v != 8 {
		t.Fatalf("requests for APIs not served: %v, want 8", v)
	}
}

func TestMaxConnections(t *testing.T) {
	ts := startServer(t, smallLog(t), func(c *Config) { c.MaxConnections = 2 })
	a, b := dialRaw(t, ts.addr, "a"), dialRaw(t, ts.addr, "b")
	a.roundTrip(apiVersions(4))
	b.roundTrip(apiVersions(4))
	c := dialRaw(t, ts.addr, "c")
	c.write(c.frame(apiVersions(4)))
	c.expectClosed()
	if v := ts.closed(reasonMaxConns); v != 1 {
		t.Fatalf("max_connections closes: %v", v)
	}
	if v := testutil.ToFloat64(ts.srv.m.conns); v != 2 {
		t.Fatalf("open connections gauge %v, want 2", v)
	}
	a.roundTrip(apiVersions(4)) // the others are unaffected
	a.c.Close()
	waitFor(t, "a's close", func() bool { return testutil.ToFloat64(ts.srv.m.conns) == 1 })
	d := dialRaw(t, ts.addr, "d")
	d.roundTrip(apiVersions(4))
}

// TestRequestsInOrder pipelines requests on one connection: answered one
// at a time, in order, Produce with acks=0 answered with nothing.
func TestRequestsInOrder(t *testing.T) {
	ts := startServer(t, smallLog(t), nil)
	rc := dialRaw(t, ts.addr, "pipe")
	prod := kmsg.NewPtrProduceRequest()
	prod.Version, prod.Acks = 9, 0
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: v2(t, batch.NewParams(0, 0), rec("x", "y", 1))}}
	prod.Topics = append(prod.Topics, pt)
	var all []byte
	all = append(all, rc.frame(apiVersions(4))...) // corr 1
	all = append(all, rc.frame(prod)...)           // corr 2: no response
	all = append(all, rc.frame(kmsg.NewPtrMetadataRequest())...)
	all = append(all, rc.frame(apiVersions(0))...)
	rc.write(all)
	for _, want := range []int32{1, 3, 4} {
		corr, _, err := rc.readFrame()
		if err != nil || corr != want {
			t.Fatalf("got corr %d (%v), want %d", corr, err, want)
		}
	}
	if n := len(ts.log.topics["t"].parts[0].entries); n != 3 {
		t.Fatalf("produce wrote: %d entries", n)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c := Config{Listen: "nohost", Advertised: "0.0.0.0:9092", SocketRequestMaxBytes: 1, MaxConnections: 0,
		ConnectionsMaxIdleMs: 0, FetchMaxBytes: 0, FetchResponseMemoryBytes: 1<<20 - 1, FetchPollIntervalMs: 0}
	err := c.Validate()
	for _, want := range []string{"listen", "advertised", "socket.request.max.bytes", "max.connections",
		"connections.max.idle.ms", "fetch.max.bytes", "fetch.response.memory.bytes", "fetch.poll.interval.ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate() = %v, want a problem with %s", err, want)
		}
	}
	for _, tc := range []struct{ listen, adv, want string }{
		{"0.0.0.0:9192", "", "127.0.0.1:9192"},
		{"[::]:9192", "", "127.0.0.1:9192"},
		{":9192", "", "127.0.0.1:9192"},
		{"10.1.2.3:9192", "", "10.1.2.3:9192"},
		{"0.0.0.0:9192", "kafka.example:19092", "kafka.example:19092"},
	} {
		cfg := DefaultConfig()
		cfg.Listen, cfg.Advertised = tc.listen, tc.adv
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		addr, _ := net.ResolveTCPAddr("tcp", tc.listen)
		h, p, _, err := advertisedAddr(cfg, addr)
		if got := net.JoinHostPort(h, strconv.Itoa(int(p))); err != nil || got != tc.want {
			t.Fatalf("listen %q advertised %q: got %q (%v), want %q", tc.listen, tc.adv, got, err, tc.want)
		}
	}
	if _, err := New(Config{Listen: "x"}, newFakeLog()); err == nil {
		t.Fatal("New accepted a bad config")
	}
}

// TestRun: Run refuses an empty listen address and one already taken, and
// serves until its context ends.
func TestRun(t *testing.T) {
	srv, err := New(DefaultConfig(), smallLog(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "listen is empty") {
		t.Fatalf("Run with the listener off: %v", err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := DefaultConfig()
	cfg.Listen = taken.Addr().String()
	srv, _ = New(cfg, smallLog(t))
	if err := srv.Run(context.Background()); err == nil {
		t.Fatal("Run on a taken port succeeded")
	}
	// A free port: find one, then let Run bind it.
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	cfg.Listen = free.Addr().String()
	free.Close()
	srv, _ = New(cfg, smallLog(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var c net.Conn
	waitFor(t, "Run to listen", func() bool { c, err = net.Dial("tcp", cfg.Listen); return err == nil })
	rc := &rawClient{t: t, c: c, id: "run"}
	if resp := rc.roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); resp.Brokers[0].Port == 0 {
		t.Fatalf("advertised %+v", resp.Brokers)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rc.expectClosed()
}

// connections.max.idle.ms of Long.MAX_VALUE (Kafka's "never") serves
// requests: it used to wrap to a negative duration, a deadline in the past
// that closed every connection at its first read or write.
func TestConfigHugeIdle(t *testing.T) {
	for _, ms := range []int64{math.MaxInt64, math.MaxInt64/1_000_000 + 1} {
		c := DefaultConfig()
		c.ConnectionsMaxIdleMs = ms
		if c.idle() <= 0 || c.pollInterval() <= 0 {
			t.Fatalf("connections.max.idle.ms %d: idle %v", ms, c.idle())
		}
		ts := startServer(t, newFakeLog(), func(c *Config) { c.ConnectionsMaxIdleMs = ms })
		rc := dialRaw(t, ts.addr, "huge-idle")
		if resp := rc.roundTrip(apiVersions(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
			t.Fatalf("connections.max.idle.ms %d: ApiVersions %+v", ms, resp)
		}
	}
}
