package listener

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/listener/groups"
	"github.com/tierd/tierd/listener/groups/groupstest"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzFrame feeds arbitrary bytes to the frame reader: it never panics,
// every frame it returns has the size its prefix declares (within the
// limit), and its buffer never holds more than twice the bytes received
// (or the first 64 KiB chunk), whatever size a prefix claims.
func FuzzFrame(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 20
		cr := &countingReader{r: bytes.NewReader(data)}
		fr := &frameReader{r: cr, idle: time.Second, max: limit}
		consumed, most := 0, 0 // bytes of whole frames read; most received for one frame
		for {
			frame, err := fr.next()
			most = max(most, cr.n-consumed)
			if c := cap(fr.buf); c > max(frameChunk, 2*most) {
				t.Fatalf("buffer of %d bytes after at most %d bytes received for a frame", c, most)
			}
			if err != nil {
				if !errors.Is(err, errClientClosed) && !errors.Is(err, errNegativeSize) && !errors.Is(err, errFrameTooLarge) {
					t.Fatalf("unexpected error class: %v", err)
				}
				return
			}
			declared := int(int32(binary.BigEndian.Uint32(data[consumed:])))
			if len(frame) != declared || declared > limit {
				t.Fatalf("frame of %d bytes, prefix says %d", len(frame), declared)
			}
			consumed += 4 + declared
		}
	})
}

// discardConn is a net.Conn that drops what is written to it.
type discardConn struct{ written int }

func (d *discardConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (d *discardConn) Write(p []byte) (int, error)      { d.written += len(p); return len(p), nil }
func (d *discardConn) Close() error                     { return nil }
func (d *discardConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (d *discardConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (d *discardConn) SetDeadline(time.Time) error      { return nil }
func (d *discardConn) SetReadDeadline(time.Time) error  { return nil }
func (d *discardConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzRequest runs arbitrary frame bodies through header parsing, kmsg
// decoding, the handlers (over a fake Log holding plain, transactional
// and multi-partition data) and response encoding: no panic, every
// response kmsg can decode again, and memory allocated per request
// bounded by a multiple of the frame's size (kmsg bounds arrays by the
// bytes left; responses by fetch.max.bytes).
func FuzzRequest(f *testing.F) {
	for _, s := range requestSeeds(f) {
		f.Add(s)
	}
	l := smallLog(f)
	tl := txnLog(f)
	l.topics["txn"] = tl.topics["txn"]
	bl, _ := budgetLog(f)
	l.topics["big"] = bl.topics["big"]
	cfg := DefaultConfig()
	cfg.FetchMaxBytes = 64 << 10
	srv, err := New(cfg, l, WithGroups(fuzzCoordinator(f)))
	if err != nil {
		f.Fatal(err)
	}
	srv.advHost, srv.advPort = "127.0.0.1", 9192
	stopping := make(chan struct{})
	close(stopping) // long polls answer at once
	f.Fuzz(func(t *testing.T, frame []byte) {
		dc := &discardConn{}
		c := &conn{s: srv, nc: dc, stopping: stopping, remote: "fuzz"}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond) // a JoinGroup or SyncGroup that waits gives up
		ce := c.request(ctx, frame, time.Now())
		cancel()
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(256*len(frame)+8<<20) {
			t.Fatalf("%d bytes allocated for a %d-byte request", alloc, len(frame))
		}
		if ce != nil || dc.written == 0 || c.out == nil { // nil: a large response, not kept
			return
		}
		// The response decodes.
		h, kreq, _, err := parseHeader(frame)
		if err != nil {
			t.Fatalf("answered a request whose header does not parse: %v", err)
		}
		resp := kreq.ResponseKind()
		if ar, _ := lookupRange(served, h.key); h.key == int16(kmsg.ApiVersions) && (h.version < ar.min || h.version > ar.max) {
			resp.SetVersion(0)
		}
		body := c.out[8:]
		if resp.IsFlexible() && h.key != int16(kmsg.ApiVersions) {
			body = skipTags(body)
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(h.key), h.version, err)
		}
	})
}

// frameSeeds are size-prefixed byte streams: whole frames, several in a
// row, a huge or negative size, a cut frame.
func frameSeeds() [][]byte {
	ok := append(binary.BigEndian.AppendUint32(nil, 5), 1, 2, 3, 4, 5)
	return [][]byte{
		ok,
		append(append([]byte{}, ok...), ok...),
		binary.BigEndian.AppendUint32(nil, 1<<30),
		binary.BigEndian.AppendUint32(nil, 0xffffffff),
		append(binary.BigEndian.AppendUint32(nil, 100000), make([]byte, 70000)...),
		{0, 0},
		{},
	}
}

// requestSeeds are frame bodies (no size prefix) of every served API at
// its lowest and highest version, and a few refused ones.
func requestSeeds(t testing.TB) [][]byte {
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed"))
	var out [][]byte
	add := func(r kmsg.Request, v int16) {
		r.SetVersion(v)
		out = append(out, fmtr.AppendRequest(nil, r, 1)[4:])
	}
	fetch := fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, minBytes: 1, maxWait: 500, iso: 1, topic: "txn", offsets: map[int32]int64{0: 0}}.build()
	meta := metadataReq(0, kmsg.StringPtr("t"), kmsg.StringPtr("txn"))
	lo := listOffsets(0, 1, lop(0, -1, -1), lop(0, -3, 0), lop(0, 1003, -1))
	ofle := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofle.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{LeaderEpoch: 0, CurrentLeaderEpoch: -1}}}}
	prod := kmsg.NewPtrProduceRequest()
	prod.Acks = -1
	prod.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte{1, 2, 3}}}}}
	for _, a := range served {
		var r kmsg.Request
		switch kmsg.Key(a.key) {
		case kmsg.Fetch:
			r = fetch
		case kmsg.Metadata:
			r = meta
		case kmsg.ListOffsets:
			r = lo
		case kmsg.OffsetForLeaderEpoch:
			r = ofle
		case kmsg.Produce:
			r = prod
		case kmsg.ApiVersions:
			r = apiVersions(0)
		}
		add(r, a.min)
		add(r, a.max)
	}
	for _, a := range groupServed {
		r := groupSeed(kmsg.Key(a.key))
		add(r, a.min)
		add(r, a.max)
	}
	add(apiVersions(0), 9)
	add(kmsg.NewPtrCreateTopicsRequest(), 3)
	return out
}

// fuzzCoordinator is a loaded coordinator over memory whose join phases
// complete at once (no initial delay).
func fuzzCoordinator(t testing.TB) *groups.Coordinator {
	gc := groups.DefaultConfig()
	gc.InitialRebalanceDelayMs = 0
	coord, err := groups.New(gc, groupstest.NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.Load(); err != nil {
		t.Fatal(err)
	}
	return coord
}

// groupSeed is a request of a group API, on group "g" and topic "t",
// with the fields of every version set.
func groupSeed(key kmsg.Key) kmsg.Request {
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{"t"}
	switch key {
	case kmsg.FindCoordinator:
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKey, r.CoordinatorKeys = "g", []string{"g", "h"}
		return r
	case kmsg.JoinGroup:
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "g", 10000, 10000, "consumer"
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md.AppendTo(nil)}}
		return r
	case kmsg.SyncGroup:
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.MemberID, r.Generation = "g", "m", 1
		r.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "m", MemberAssignment: []byte{0, 0}}}
		return r
	case kmsg.Heartbeat:
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.MemberID, r.Generation = "g", "m", 1
		return r
	case kmsg.LeaveGroup:
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group, r.MemberID, r.Members = "g", "m", []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
		return r
	case kmsg.OffsetCommit:
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = "g", -1
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
		return r
	case kmsg.OffsetFetch:
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Group = "g"
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
		return r
	case kmsg.ListGroups:
		return kmsg.NewPtrListGroupsRequest()
	case kmsg.DescribeGroups:
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups = []string{"g"}
		return r
	case kmsg.DeleteGroups:
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{"g"}
		return r
	case kmsg.OffsetDelete:
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = "g"
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		return r
	}
	panic(fmt.Sprintf("no seed for %s", kmsg.NameForKey(int16(key))))
}

// TestWriteFuzzSeeds writes the seeds to testdata/fuzz when
// TIERD_WRITE_FUZZ_SEEDS is set (they are checked in; go test runs them
// as regular tests).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("TIERD_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set TIERD_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz")
	}
	for name, seeds := range map[string][][]byte{"FuzzFrame": frameSeeds(), "FuzzRequest": requestSeeds(t), "FuzzSASL": saslSeeds()} {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRequestSeedsAnswered: the served seeds are answered (so the fuzzer
// starts from requests that reach the handlers); the refused ones close.
func TestRequestSeedsAnswered(t *testing.T) {
	srv, err := New(DefaultConfig(), smallLog(t), WithGroups(fuzzCoordinator(t)))
	if err != nil {
		t.Fatal(err)
	}
	stopping := make(chan struct{})
	close(stopping)
	seeds := requestSeeds(t)
	for i, s := range seeds {
		dc := &discardConn{}
		c := &conn{s: srv, nc: dc, stopping: stopping}
		ce := c.request(context.Background(), s, time.Now())
		refused := i >= len(seeds)-1 // CreateTopics
		if (ce != nil) != refused || (!refused && dc.written == 0) {
			t.Fatalf("seed %d: close %v, %d bytes written", i, ce, dc.written)
		}
	}
}
