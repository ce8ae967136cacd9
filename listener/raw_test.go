package listener

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawClient speaks the Kafka protocol over one connection, with kmsg.
type rawClient struct {
	t    testing.TB
	c    net.Conn
	corr int32
	id   string
}

func dialRaw(t testing.TB, addr, clientID string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, c: c, id: clientID}
}

// frame returns a request's frame (size prefix included).
func (rc *rawClient) frame(req kmsg.Request) []byte {
	rc.corr++
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID(rc.id)).AppendRequest(nil, req, rc.corr)
}

func (rc *rawClient) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

// readFrame reads one response frame: correlation id and the rest.
func (rc *rawClient) readFrame() (int32, []byte, error) {
	rc.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.c, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// roundTrip sends req and decodes its response (response header v1 for
// flexible versions except ApiVersions).
func (rc *rawClient) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	rc.write(rc.frame(req))
	corr, body, err := rc.readFrame()
	if err != nil {
		rc.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if corr != rc.corr {
		rc.t.Fatalf("correlation id %d, want %d", corr, rc.corr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// expectClosed reads until the server closes the connection; it fails
// when a response arrives instead.
func (rc *rawClient) expectClosed() {
	rc.t.Helper()
	_, _, err := rc.readFrame()
	if err == nil {
		rc.t.Fatal("got a response; want the connection closed")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		rc.t.Fatal("connection still open")
	}
}

// apiVersions is an ApiVersions request at version v.
func apiVersions(v int16) *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = v
	r.ClientSoftwareName, r.ClientSoftwareVersion = "tierd-test", "1.0"
	return r
}

// skipTags drops a flexible response header's tagged fields.
func skipTags(body []byte) []byte {
	r := kbin.Reader{Src: body}
	kmsg.SkipTags(&r)
	return r.Src
}

// goroutines returns every goroutine's stack.
func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
