package cluster

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrLoginRefused: the cluster answered a relayed login's
// SaslAuthenticate with SASL_AUTHENTICATION_FAILED (a wrong password, an
// unknown user, a malformed exchange).
var ErrLoginRefused = errors.New("cluster: the cluster refused the login")

// maxLoginResponse bounds a SaslHandshake or SaslAuthenticate answer,
// bytes (Kafka's sasl.server.max.receive.size is 524288 for requests; an
// answer is smaller).
const maxLoginResponse = 1 << 20

// Login is a client's SASL login relayed to the cluster (KIP-152): a
// connection of its own to a bootstrap server, on which SaslHandshake v1
// named the mechanism, then SaslAuthenticate v1 requests carry the
// client's messages. It is not tierd's own session: it authenticates the
// client, with the client's credentials, and is closed once the exchange
// ends. Not safe for concurrent use.
type Login struct {
	conn net.Conn
	f    *kmsg.RequestFormatter
	corr int32
}

// BeginLogin dials the bootstrap servers in order (over TLS when
// kafka.tls is enabled) until one answers, and sends SaslHandshake v1
// with mechanism. Errors: ctx's deadline or every server unreachable, a
// cluster that does not enable the mechanism (UNSUPPORTED_SASL_MECHANISM
// named in the error); none of them is ErrLoginRefused, since the client
// was not judged.
func (c *Client) BeginLogin(ctx context.Context, mechanism string) (*Login, error) {
	var tc *tls.Config
	if c.cfg.TLS.Enabled {
		var err error
		if tc, err = c.cfg.TLS.config(); err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, addr := range c.cfg.BootstrapServers {
		conn, err := c.dialLogin(ctx, addr, tc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l := &Login{conn: conn, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(c.cfg.ClientID))}
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, mechanism
		resp, err := l.roundTrip(ctx, req)
		if err != nil {
			conn.Close()
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
			conn.Close()
			return nil, fmt.Errorf("cluster: %s answered SaslHandshake for %s with %w (enabled there: %v)", addr, mechanism, err,
				resp.(*kmsg.SASLHandshakeResponse).SupportedMechanisms)
		}
		return l, nil
	}
	return nil, fmt.Errorf("cluster: no bootstrap server answered a login: %w", errors.Join(errs...))
}

func (c *Client) dialLogin(ctx context.Context, addr string, tc *tls.Config) (net.Conn, error) {
	d := &net.Dialer{Timeout: c.cfg.RequestTimeout}
	if tc == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	tc = tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(addr)
	}
	return (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(ctx, "tcp", addr)
}

// Step sends msg in a SaslAuthenticate v1 and returns the cluster's
// bytes. Errors: ErrLoginRefused (wrapped) when the cluster refused, any
// other when it could not be asked.
func (l *Login) Step(ctx context.Context, msg []byte) ([]byte, error) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 1, msg
	resp, err := l.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.SASLAuthenticateResponse)
	switch r.ErrorCode {
	case 0:
		return r.SASLAuthBytes, nil
	case kerr.SaslAuthenticationFailed.Code:
		return nil, fmt.Errorf("%w (%s)", ErrLoginRefused, kerr.ErrorForCode(r.ErrorCode))
	}
	return nil, fmt.Errorf("cluster: SaslAuthenticate: %w", kerr.ErrorForCode(r.ErrorCode))
}

// Close closes the login's connection.
func (l *Login) Close() error { return l.conn.Close() }

// roundTrip writes req and reads its answer, within ctx's deadline (or
// the client's request timeout when it has none).
func (l *Login) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	if err := l.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	l.corr++
	if _, err := l.conn.Write(l.f.AppendRequest(nil, req, l.corr)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(l.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxLoginResponse {
		return nil, fmt.Errorf("cluster: a %s answer of %d bytes", kmsg.NameForKey(req.Key()), n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(l.conn, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != l.corr {
		return nil, fmt.Errorf("cluster: answer for correlation id %d, want %d", got, l.corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body[4:]); err != nil {
		return nil, fmt.Errorf("cluster: %s answer: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
