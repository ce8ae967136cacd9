package rsmapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// rawRequest writes a request's head and the first part of its body on a
// connection of its own, and leaves the rest of the body unsent: a
// client that stalls mid-body. answer reads what the endpoint answers.
type rawRequest struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func (r *rig) stall(t *testing.T, method, path, token, ctype string, body []byte, sent int) *rawRequest {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var h strings.Builder
	fmt.Fprintf(&h, "%s %s HTTP/1.1\r\nHost: tierd\r\nContent-Length: %d\r\n", method, path, len(body))
	if token != "" {
		fmt.Fprintf(&h, "Authorization: Bearer %s\r\n", token)
	}
	if ctype != "" {
		fmt.Fprintf(&h, "Content-Type: %s\r\n", ctype)
	}
	h.WriteString("\r\n")
	if _, err := conn.Write(append([]byte(h.String()), body[:sent]...)); err != nil {
		t.Fatal(err)
	}
	return &rawRequest{t: t, conn: conn, br: bufio.NewReader(conn)}
}

// answer reads the endpoint's answer (hangGuard bounds the wait: no
// answer at all is the failure), and whether the endpoint then closed the
// connection.
func (q *rawRequest) answer() (a answer, closed bool) {
	q.t.Helper()
	q.conn.SetReadDeadline(time.Now().Add(hangGuard))
	resp, err := http.ReadResponse(q.br, nil)
	if err != nil {
		q.t.Fatalf("no answer to a request whose client stalled mid-body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, err = q.br.ReadByte()
	return answer{code: resp.StatusCode, h: resp.Header, body: b}, err == io.EOF
}

// TestStalledCopyBodyEndsAtCopyTimeout: a copy whose client sends part of
// its body and then nothing ends at rsm.copy_timeout (504) like any other
// copy, and gives back its slot: a read of the body does not wait past
// the copy's end.
func TestStalledCopyBodyEndsAtCopyTimeout(t *testing.T) {
	r := newRig(t, withConfig(func(c *Config) { c.CopyTimeout, c.MaxConcurrentCopies = 200*time.Millisecond, 1 }))
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	for _, mode := range []struct{ name, ctype string }{{"upload", UploadContentType}, {"path", "application/json"}} {
		t.Run(mode.name, func(t *testing.T) {
			body := s.uploadBody()
			if mode.ctype == "application/json" {
				body, _ = io.ReadAll(s.body())
			}
			q := r.stall(t, http.MethodPut, s.path(), testToken, mode.ctype, body, 40)
			a, closed := q.answer()
			if a.code != http.StatusGatewayTimeout || a.reason() != "TIMEOUT" {
				t.Errorf("%d %s; want 504 TIMEOUT", a.code, a.body)
			}
			if !closed {
				t.Error("the connection of a client that stalled mid-body stays open")
			}
			other := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 1})
			if a := r.do(http.MethodPut, other.path(), other.body(), "-"); a.code != http.StatusOK {
				t.Errorf("the next copy with max_concurrent_copies 1: %d %s", a.code, a.body)
			}
			r.do(http.MethodDelete, other.path(), nil, "-")
			if keys := r.keys(); len(keys) != 0 {
				t.Errorf("objects left: %v", keys)
			}
		})
	}
}

// TestDeleteEndsStalledCopy: a DELETE of a segment id whose copy is stuck
// reading its body ends that copy (503 to it) and is answered 204, as for
// any copy in flight.
func TestDeleteEndsStalledCopy(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	q := r.stall(t, http.MethodPut, s.path(), testToken, UploadContentType, s.uploadBody(), 40)
	for r.srv.flights.copying() < 1 {
		yield()
	}
	d := make(chan answer, 1)
	go func() { d <- r.do(http.MethodDelete, s.path(), nil, "-") }()
	a, _ := q.answer()
	if a.code != http.StatusServiceUnavailable {
		t.Errorf("the stalled copy, ended by the DELETE: %d %s; want 503", a.code, a.body)
	}
	if got := <-d; got.code != http.StatusNoContent {
		t.Errorf("DELETE of the id of a stalled copy: %d %s; want 204", got.code, got.body)
	}
}

// TestUnreadBodyIsNotWaitedFor: a request the endpoint answers without
// reading its body (refused for its token, a route that takes no body, a
// copy refused before its body is read) is answered even when its client
// stalls mid-body, and the connection is then closed: the server does
// not wait for the rest of the body without end, holding a goroutine and
// a descriptor for a client that never sends it. A refused token also
// gets no keep-alive.
func TestUnreadBodyIsNotWaitedFor(t *testing.T) {
	r := newRig(t, withOptions(func(s *Server) { s.bodyGrace = 50 * time.Millisecond }))
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	body, _ := io.ReadAll(s.body())
	for _, tc := range []struct {
		name, method, path, token string
		code                      int
	}{
		{"no token", http.MethodPut, s.path(), "", http.StatusUnauthorized},
		{"a wrong token", http.MethodGet, "/v1/health", "not-the-token-at-all-0123456789", http.StatusUnauthorized},
		{"a health check with a body", http.MethodGet, "/v1/health", testToken, http.StatusOK},
		{"a copy with a bad name", http.MethodPut, "/v1/segments/orders/00/0/" + s.name.id.String(), testToken, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, closed := r.stall(t, tc.method, tc.path, tc.token, "application/json", body, 10).answer()
			if a.code != tc.code {
				t.Errorf("%d %s; want %d", a.code, a.body, tc.code)
			}
			if !closed {
				t.Error("the connection stays open for the rest of a body the endpoint will not read")
			}
		})
	}
	// A refused token with its whole body sent: answered, and closed.
	a, closed := r.stall(t, http.MethodPut, s.path(), "", "application/json", body, len(body)).answer()
	if a.code != http.StatusUnauthorized || !closed {
		t.Errorf("a whole copy without the token: %d, closed %v; want 401 and the connection closed", a.code, closed)
	}
	nothingStored(t, r)
}

// TestSlowReaderOfALog: a client that asks for a whole .log and reads
// none of the answer does not hold the read (and the object store's
// stream behind it) past rsm.request_timeout: a write that cannot go on
// ends with the request, and the read is counted failed.
func TestSlowReaderOfALog(t *testing.T) {
	r := newRig(t, withConfig(func(c *Config) { c.RequestTimeout = 300 * time.Millisecond }))
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	// More than the socket buffers of both ends hold.
	s.log, s.end = bigSegment(t, 12)
	s.index, s.timeIndex = []byte{}, []byte{}
	for name, data := range map[string][]byte{kafkalog.LogSuffix: s.log, kafkalog.IndexSuffix: nil, kafkalog.TimeIndexSuffix: nil} {
		if err := os.WriteFile(s.file(name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.req["endOffset"], s.req["segmentSizeInBytes"] = s.end, len(s.log)
	r.copy(s)
	q := r.stall(t, http.MethodGet, s.path()+"/log", testToken, "", nil, 0)
	defer q.conn.Close()
	for end := time.Now().Add(hangGuard); r.counter("tierd_rsm_fetch_errors_total", "topic", "orders", "partition", "0") < 1; yield() {
		if time.Now().After(end) {
			t.Fatal("the read of a client that reads nothing of its answer never ended")
		}
	}
}

// TestTokenInNoMetricOrStatus: after requests with the token, without it
// and with a wrong one, neither the token nor the wrong one appears in a
// metric or the status (the rig checks the log, at debug level, and the
// answers).
func TestTokenInNoMetricOrStatus(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	wrong := "wrong-token-but-long-enough-0123"
	r.copy(s)
	r.do(http.MethodGet, s.path()+"/log", nil, wrong)
	r.do(http.MethodGet, s.path()+"/log", nil, "")
	r.do(http.MethodGet, "/v1/status", nil, wrong)
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, mf := range mfs {
		fmt.Fprintln(&text, mf.String())
	}
	st, _ := json.Marshal(r.srv.Status())
	for where, got := range map[string]string{"metrics": text.String(), "status": string(st)} {
		for _, tok := range []string{testToken, wrong} {
			if strings.Contains(got, tok) {
				t.Errorf("a token appears in the %s", where)
			}
		}
	}
}
