package listener

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/saturate"
)

// conn is one client connection. Requests are read, handled and answered
// one at a time, in order, as Kafka does (it mutes a connection while a
// request is in progress).
type conn struct {
	s        *Server
	nc       net.Conn
	stopping chan struct{}
	remote   string
	ip       string // the client address, as max.connections.per.ip counts
	clientID string // the last request's, for log lines

	principal string // who the client is, as Kafka names it ("User:ANONYMOUS"): authz.go
	host      string // its address as Kafka's ACLs compare it
	sasl      saslState

	mu      sync.Mutex
	stopped bool
	out     []byte

	fetchHeld int64 // Fetch memory held until the response is written (fetchmem.go)
}

// stop makes a connection waiting for a request end now; one handling a
// request finishes it first.
func (c *conn) stop() {
	c.mu.Lock()
	c.stopped = true
	c.nc.SetReadDeadline(time.Now())
	c.mu.Unlock()
}

func (c *conn) setReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		t = time.Now()
	}
	return c.nc.SetReadDeadline(t)
}

func (c *conn) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// closeErr is why a connection ends.
type closeErr struct {
	reason string
	err    error
	h      *header // the request that caused it, if one was read
}

func (e *closeErr) Error() string { return e.reason + ": " + e.err.Error() }

func (c *conn) serve(ctx context.Context) {
	defer c.s.dropConn(c)
	defer c.nc.Close()
	defer c.endLogin()
	if ce := c.handshake(ctx); ce != nil {
		c.closing(ce)
		return
	}
	if ce := c.identify(); ce != nil {
		c.closing(ce)
		return
	}
	c.sasl.deadline = time.Now().Add(saturate.Millis(c.s.cfg.SASLAuthenticationTimeoutMs))
	fr := &frameReader{r: c.nc, setDeadline: c.setReadDeadline}
	for {
		fr.max, fr.idle, fr.until = c.saslFrameLimits()
		if fr.idle <= 0 {
			c.closing(&closeErr{reason: reasonSASLTimeout, err: errors.New("no login within sasl.authentication.timeout.ms")})
			return
		}
		frame, err := fr.next()
		if err != nil {
			if c.s.cfg.SASL() && c.sasl.loggingIn() && (errors.Is(err, errIdle) || errors.Is(err, errStalled)) &&
				!c.isStopped() && !time.Now().Before(c.sasl.deadline) {
				c.closing(&closeErr{reason: reasonSASLTimeout, err: err})
				return
			}
			c.closing(c.frameCloseErr(err))
			return
		}
		start := time.Now()
		var ce *closeErr
		if c.sasl.v0 && c.sasl.sess != nil {
			ce = c.saslToken(ctx, frame)
		} else {
			ce = c.request(ctx, frame, start)
		}
		if ce != nil {
			c.closing(ce)
			return
		}
	}
}

func (c *conn) frameCloseErr(err error) *closeErr {
	if c.isStopped() {
		return &closeErr{reason: reasonShutdown, err: err}
	}
	switch {
	case errors.Is(err, errIdle):
		return &closeErr{reason: reasonIdle, err: err}
	case errors.Is(err, errStalled):
		return &closeErr{reason: reasonStalled, err: err}
	case errors.Is(err, errFrameTooLarge):
		return &closeErr{reason: reasonTooLarge, err: err}
	case errors.Is(err, errNegativeSize):
		return &closeErr{reason: reasonNegative, err: err}
	}
	return &closeErr{reason: reasonClient, err: err}
}

// closing counts and logs why the connection ends. Problems of the
// client's making are logged once per client at warn, tierd's own
// failures once per client at error; ordinary ends (client closed, idle,
// shutdown) at debug.
func (c *conn) closing(ce *closeErr) {
	c.s.m.closed.WithLabelValues(ce.reason).Inc()
	attrs := []any{"remote", c.remote, "client_id", c.clientID, "reason", ce.reason, "err", ce.err.Error()}
	if ce.h != nil {
		attrs = append(attrs, "api", kmsg.NameForKey(ce.h.key), "api_key", ce.h.key, "version", ce.h.version)
	}
	switch ce.reason {
	case reasonClient, reasonIdle, reasonShutdown:
		c.s.logger.Debug("Kafka connection closed", attrs...)
		return
	}
	key := ce.reason
	if ce.h != nil {
		key += "/" + strconv.Itoa(int(ce.h.key)) + "/" + strconv.Itoa(int(ce.h.version))
	}
	if !c.s.once.first(key, hostOf(c.nc.RemoteAddr()), c.clientID) {
		return
	}
	if ce.reason == reasonServerFailed { // tierd's failure, not the client's
		c.s.logger.Error("Kafka connection closed (logged once per client)", attrs...)
		return
	}
	c.s.logger.Warn("Kafka connection closed (logged once per client)", attrs...)
}

// request parses, handles and answers one frame; a non-nil result closes
// the connection.
func (c *conn) request(ctx context.Context, frame []byte, start time.Time) *closeErr {
	defer c.releaseFetch() // after the response is written, or the connection closes
	h, kreq, body, err := parseHeader(frame)
	if err != nil {
		return &closeErr{reason: reasonMalformed, err: err}
	}
	c.clientID = h.clientID
	api := apiName(h.key)
	if kreq == nil {
		return c.unsupported(&h, fmt.Errorf("unknown API key %d", h.key))
	}
	if c.s.cfg.SASL() {
		if handled, ce := c.saslGate(ctx, &h, kreq, body, start); handled || ce != nil {
			return ce
		}
	}
	ar, ok := c.s.servedRange(h.key)
	if !ok || h.version < ar.min || h.version > ar.max {
		if h.key == int16(kmsg.ApiVersions) {
			resp := unsupportedApiVersions()
			countErrors(c.s.m, api, resp)
			return c.respond(&h, api, resp, start)
		}
		return c.unsupported(&h, fmt.Errorf("%s v%d is not served", kmsg.NameForKey(h.key), h.version))
	}
	if err := kreq.ReadFrom(body); err != nil {
		return &closeErr{reason: reasonMalformed, err: fmt.Errorf("%w: %s v%d body: %w", errMalformed, kmsg.NameForKey(h.key), h.version, err), h: &h}
	}
	resp, err := c.s.dispatch(ctx, c, &h, kreq)
	if err != nil {
		var ce *closeErr
		if errors.As(err, &ce) {
			ce.h = &h
			return ce
		}
		reason := reasonServerFailed
		if ctx.Err() != nil {
			reason = reasonShutdown
		}
		return &closeErr{reason: reason, err: err, h: &h}
	}
	c.s.m.requests.WithLabelValues(api, strconv.Itoa(int(h.version))).Inc()
	if resp == nil { // Produce with acks=0: no response, as Kafka
		c.s.m.duration.WithLabelValues(api).Observe(time.Since(start).Seconds())
		return nil
	}
	countErrors(c.s.m, api, resp)
	return c.respond(&h, api, resp, start)
}

func (c *conn) unsupported(h *header, err error) *closeErr {
	c.s.m.requests.WithLabelValues(apiOther, "").Inc()
	return &closeErr{reason: reasonUnsupported, err: err, h: h}
}

// respond writes one response: the size, response header v0 (correlation
// id) or, for flexible versions other than ApiVersions (KIP-511), v1 (an
// empty tagged-field section), then the body kmsg encodes.
func (c *conn) respond(h *header, api string, resp kmsg.Response, start time.Time) *closeErr {
	b := append(c.out[:0], 0, 0, 0, 0)
	b = kbin.AppendInt32(b, h.corr)
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		b = kbin.AppendUvarint(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	c.out = b
	defer func() {
		if cap(c.out) > keepBuffer { // a large Fetch response is not kept
			c.out = nil
		}
	}()
	if err := c.nc.SetWriteDeadline(time.Now().Add(min(c.s.cfg.idle(), c.s.cfg.writeTimeout()))); err != nil {
		return &closeErr{reason: reasonWriteFailed, err: err, h: h}
	}
	n, err := c.nc.Write(b)
	c.s.m.bytesOut.WithLabelValues(api).Add(float64(n))
	c.s.m.duration.WithLabelValues(api).Observe(time.Since(start).Seconds())
	if err != nil {
		return &closeErr{reason: reasonWriteFailed, err: err, h: h}
	}
	return nil
}

// dispatch runs the handler of a served request. A nil response means no
// response is sent (Produce with acks=0). An error closes the connection.
func (s *Server) dispatch(ctx context.Context, c *conn, h *header, kreq kmsg.Request) (kmsg.Response, error) {
	switch req := kreq.(type) {
	case *kmsg.ApiVersionsRequest:
		return s.handleApiVersions(req), nil
	case *kmsg.MetadataRequest:
		return s.handleMetadata(ctx, c, req)
	case *kmsg.ListOffsetsRequest:
		return s.handleListOffsets(ctx, c, req)
	case *kmsg.FetchRequest:
		return s.handleFetch(ctx, c, req)
	case *kmsg.OffsetForLeaderEpochRequest:
		return s.handleOffsetForLeaderEpoch(ctx, c, req)
	case *kmsg.FindCoordinatorRequest:
		return s.handleFindCoordinator(c, req), nil
	}
	if s.fwd != nil && isGroupAPI(h.key) {
		return s.forwardGroup(ctx, c, kreq)
	}
	switch req := kreq.(type) {
	case *kmsg.JoinGroupRequest:
		return s.handleJoinGroup(ctx, c, req)
	case *kmsg.SyncGroupRequest:
		return s.handleSyncGroup(ctx, c, req)
	case *kmsg.HeartbeatRequest:
		return s.handleHeartbeat(c, req), nil
	case *kmsg.LeaveGroupRequest:
		return s.handleLeaveGroup(c, req), nil
	case *kmsg.OffsetCommitRequest:
		return s.handleOffsetCommit(ctx, c, req)
	case *kmsg.OffsetFetchRequest:
		return s.handleOffsetFetch(c, req), nil
	case *kmsg.ListGroupsRequest:
		return s.handleListGroups(c, req), nil
	case *kmsg.DescribeGroupsRequest:
		return s.handleDescribeGroups(c, req), nil
	case *kmsg.DeleteGroupsRequest:
		return s.handleDeleteGroups(c, req), nil
	case *kmsg.OffsetDeleteRequest:
		return s.handleOffsetDelete(ctx, c, req)
	case *kmsg.ProduceRequest:
		resp := s.handleProduce(req)
		if resp == nil {
			return nil, nil
		}
		if s.once.first("produce", hostOf(c.nc.RemoteAddr()), h.clientID) {
			s.logger.Warn("Kafka Produce refused: tierd is read-only (logged once per client)",
				"remote", c.remote, "client_id", h.clientID, "version", h.version)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("listener: no handler for %s", kmsg.NameForKey(h.key))
}
