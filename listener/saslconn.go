package listener

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/saturate"
	"github.com/tierd/tierd/listener/sasl"
)

// WithSASL gives the credentials clients log in with when
// Config.SASLEnabledMechanisms is set (required then).
func WithSASL(a sasl.Authenticator) Option { return func(s *Server) { s.sasl = a } }

// The SASL APIs served when SASL is on (KIP-43, KIP-152, KIP-368).
var saslServed = []apiRange{
	{int16(kmsg.SASLHandshake), 0, 1},
	{int16(kmsg.SASLAuthenticate), 0, 2},
}

// saslState is a connection's login.
type saslState struct {
	authed   bool         // logged in (c.principal is who)
	sess     sasl.Session // a login in progress, after SaslHandshake
	mech     string
	v0       bool      // SaslHandshake v0: the next frames are raw SASL tokens, not requests
	deadline time.Time // the first login must be done by then
	expires  time.Time // the login's end (connections.max.reauth.ms); zero: none
}

// loggingIn reports whether a login is under way: the first, or a
// re-authentication begun with its SaslHandshake.
func (s *saslState) loggingIn() bool { return !s.authed || s.sess != nil }

// Reasons a SASL connection is closed.
const (
	reasonSASLFailed  = "sasl_authentication_failed" // a failed login (answered SASL_AUTHENTICATION_FAILED)
	reasonSASLState   = "sasl_illegal_state"         // a request out of the SASL exchange's order, or before login
	reasonSASLTimeout = "sasl_timeout"               // no login within sasl.authentication.timeout.ms
	reasonReauth      = "sasl_reauthentication"      // a request after the login's lifetime (KIP-368)
)

// saslFrameLimits returns the frame size bound, idle bound and hard
// deadline (zero: none) for the next frame: before login and during a
// re-authentication, sasl.server.max.receive.size, the time left to log
// in (0 when it has run out) and the login deadline itself, so that a
// frame trickling in cannot stretch the time to log in, nor a client
// stalling in a re-authentication hold what the login holds (a relayed
// login's connection to the cluster) past sasl.authentication.timeout.ms.
func (c *conn) saslFrameLimits() (max int32, idle time.Duration, until time.Time) {
	cfg := c.s.cfg
	if !cfg.SASL() || !c.sasl.loggingIn() {
		return cfg.SocketRequestMaxBytes, cfg.idle(), time.Time{}
	}
	return cfg.SASLServerMaxReceiveSize, min(cfg.idle(), time.Until(c.sasl.deadline)), c.sasl.deadline
}

// saslGate decides a request (its header read) on a SASL listener:
// handled says it was a SASL request, answered here; a non-nil closeErr
// closes the connection.
func (c *conn) saslGate(ctx context.Context, h *header, kreq kmsg.Request, body []byte, start time.Time) (handled bool, ce *closeErr) {
	switch kmsg.Key(h.key) {
	case kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		ar := saslServed[0]
		if kmsg.Key(h.key) == kmsg.SASLAuthenticate {
			ar = saslServed[1]
		}
		if h.version < ar.min || h.version > ar.max {
			return true, c.unsupported(h, fmt.Errorf("%s v%d is not served", kmsg.NameForKey(h.key), h.version))
		}
		if err := kreq.ReadFrom(body); err != nil {
			return true, &closeErr{reason: reasonMalformed, err: fmt.Errorf("%w: %s v%d body: %w", errMalformed, kmsg.NameForKey(h.key), h.version, err), h: h}
		}
		c.s.m.requests.WithLabelValues(kmsg.NameForKey(h.key), fmt.Sprint(h.version)).Inc()
		if req, ok := kreq.(*kmsg.SASLHandshakeRequest); ok {
			return true, c.saslHandshake(h, req, start)
		}
		return true, c.saslAuthenticate(ctx, h, kreq.(*kmsg.SASLAuthenticateRequest), start)
	case kmsg.ApiVersions:
		return false, nil
	}
	switch {
	case !c.sasl.authed:
		return true, &closeErr{reason: reasonSASLState, err: fmt.Errorf("%s before the client logged in", kmsg.NameForKey(h.key)), h: h}
	case c.sasl.sess != nil:
		return true, &closeErr{reason: reasonSASLState, err: fmt.Errorf("%s in the middle of a re-authentication", kmsg.NameForKey(h.key)), h: h}
	case !c.sasl.expires.IsZero() && time.Now().After(c.sasl.expires):
		return true, &closeErr{reason: reasonReauth, err: fmt.Errorf("the login of %s ended (connections.max.reauth.ms) and the client did not log in again", c.principal), h: h}
	}
	return false, nil
}

func (c *conn) saslHandshake(h *header, req *kmsg.SASLHandshakeRequest, start time.Time) *closeErr {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = slices.Clone(c.s.cfg.SASLEnabledMechanisms)
	var why error
	switch {
	case c.sasl.sess != nil:
		why = errors.New("a second SaslHandshake before the first login ended")
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case c.sasl.authed && h.version == 0:
		why = errors.New("re-authentication needs SaslHandshake v1 (KIP-368)")
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case !slices.Contains(c.s.cfg.SASLEnabledMechanisms, req.Mechanism):
		why = fmt.Errorf("mechanism %q is not enabled", req.Mechanism)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		sess, err := c.s.sasl.Begin(req.Mechanism)
		if err != nil {
			why = err
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			break
		}
		c.sasl.sess, c.sasl.mech, c.sasl.v0 = sess, req.Mechanism, h.version == 0
		if c.sasl.authed { // a re-authentication has the first login's time
			c.sasl.deadline = time.Now().Add(saturate.Millis(c.s.cfg.SASLAuthenticationTimeoutMs))
		}
	}
	countErrors(c.s.m, kmsg.NameForKey(h.key), resp)
	if ce := c.respond(h, kmsg.NameForKey(h.key), resp, start); ce != nil {
		return ce
	}
	if why != nil {
		return &closeErr{reason: reasonSASLState, err: why, h: h}
	}
	return nil
}

func (c *conn) saslAuthenticate(ctx context.Context, h *header, req *kmsg.SASLAuthenticateRequest, start time.Time) *closeErr {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	api := kmsg.NameForKey(h.key)
	if c.sasl.sess == nil || c.sasl.v0 {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake v1 before it")
		countErrors(c.s.m, api, resp)
		if ce := c.respond(h, api, resp, start); ce != nil {
			return ce
		}
		return &closeErr{reason: reasonSASLState, err: errors.New("SaslAuthenticate without a SaslHandshake v1 before it"), h: h}
	}
	reply, done, err := c.step(req.SASLAuthBytes)
	if err == nil && done {
		err = c.loggedIn()
	}
	if err != nil {
		c.loginFailed(ctx, err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(sasl.ClientMessage(c.sasl.mech))
		countErrors(c.s.m, api, resp)
		if ce := c.respond(h, api, resp, start); ce != nil {
			return ce
		}
		return &closeErr{reason: reasonSASLFailed, err: err, h: h}
	}
	resp.SASLAuthBytes = reply
	if done && h.version >= 1 && !c.sasl.expires.IsZero() {
		resp.SessionLifetimeMillis = max(time.Until(c.sasl.expires).Milliseconds(), 1)
	}
	return c.respond(h, api, resp, start)
}

// saslToken handles one raw SASL token frame after a SaslHandshake v0:
// the reply goes back as a size-prefixed frame of its own; a failure
// closes the connection (v0 has no way to say why).
func (c *conn) saslToken(ctx context.Context, frame []byte) *closeErr {
	reply, done, err := c.step(frame)
	if err == nil && done {
		err = c.loggedIn()
	}
	if err != nil {
		c.loginFailed(ctx, err)
		return &closeErr{reason: reasonSASLFailed, err: err}
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(len(reply)))
	b = append(b, reply...)
	if err := c.nc.SetWriteDeadline(time.Now().Add(min(c.s.cfg.idle(), c.s.cfg.writeTimeout()))); err != nil {
		return &closeErr{reason: reasonWriteFailed, err: err}
	}
	if _, err := c.nc.Write(b); err != nil {
		return &closeErr{reason: reasonWriteFailed, err: err}
	}
	return nil
}

// errTooManyLogins: the client's address has sasl.max.inflight.logins.per.ip
// SASL steps in progress already.
var errTooManyLogins = fmt.Errorf("%w: too many logins in progress from this address (sasl.max.inflight.logins.per.ip)", sasl.ErrAuthenticationFailed)

// step runs one SASL step of c's login, unless its address already has
// sasl.max.inflight.logins.per.ip steps running (a PLAIN step hashes the
// password, thousands of HMACs): then the login fails without it, so that
// parallel guesses from one address cost bounded CPU.
func (c *conn) step(msg []byte) ([]byte, bool, error) {
	if !c.s.steps.enter(c.ip, c.s.cfg.SASLMaxInflightLoginsPerIP) {
		return nil, true, errTooManyLogins
	}
	defer c.s.steps.leave(c.ip)
	return c.sasl.sess.Step(msg)
}

// inflight counts SASL steps running, by client address.
type inflight struct {
	mu sync.Mutex
	m  map[string]int
}

func (f *inflight) enter(addr string, limit int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]int{}
	}
	if f.m[addr] >= limit {
		return false
	}
	f.m[addr]++
	return true
}

func (f *inflight) leave(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m[addr]--; f.m[addr] <= 0 {
		delete(f.m, addr)
	}
}

// loggedIn ends a successful exchange: the client is its principal now;
// a re-authentication must keep the principal (Kafka's rule).
func (c *conn) loggedIn() error {
	p := c.sasl.sess.Principal()
	if c.sasl.authed && p != c.principal {
		return fmt.Errorf("%w: re-authentication as %s on a connection logged in as %s", sasl.ErrAuthenticationFailed, p, c.principal)
	}
	c.endLogin()
	c.principal, c.sasl.authed, c.sasl.sess, c.sasl.v0 = p, true, nil, false
	if ms := c.s.cfg.ConnectionsMaxReauthMs; ms > 0 {
		c.sasl.expires = time.Now().Add(saturate.Millis(ms))
	}
	c.s.m.logins.WithLabelValues(c.sasl.mech, "ok").Inc()
	c.s.logger.Debug("Kafka client logged in", "remote", c.remote, "principal", p, "mechanism", c.sasl.mech)
	return nil
}

// loginFailed counts a failed login, logs it once per client address and
// mechanism (the user named, never a password), and waits
// connection.failed.authentication.delay.ms times the address's failures
// in the minute since its first counted one (at most 50 times) before the answer goes.
//
// A login that failed because the Kafka cluster could not be asked
// (sasl.ErrUnavailable) is counted as "unavailable" and not held against
// the address.
func (c *conn) loginFailed(ctx context.Context, err error) {
	c.endLogin()
	if errors.Is(err, sasl.ErrUnavailable) {
		c.s.m.logins.WithLabelValues(c.sasl.mech, "unavailable").Inc()
		if c.s.once.first("sasl_unavailable/"+c.sasl.mech, c.host, "") {
			c.s.logger.Warn("Kafka login failed: the Kafka cluster that checks logins could not be asked (logged once per client address and mechanism)",
				"remote", c.remote, "mechanism", c.sasl.mech, "err", err.Error())
		}
		return
	}
	c.s.m.logins.WithLabelValues(c.sasl.mech, "failed").Inc()
	if c.s.once.first("sasl_failed/"+c.sasl.mech, c.host, "") {
		c.s.logger.Warn("Kafka login failed (logged once per client address and mechanism)", "remote", c.remote,
			"mechanism", c.sasl.mech, "err", err.Error())
	}
	n := c.s.failures.add(c.host, time.Now())
	d := saturate.Millis(c.s.cfg.ConnectionFailedAuthenticationDelayMs) * time.Duration(min(n, 50))
	if c.s.failureDelayed != nil {
		c.s.failureDelayed(c.remote, n, d)
	}
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-c.stopping:
	}
}

// failureCounts counts failed logins by client address over the last
// minute; it forgets everything when it holds more than 10,000
// addresses.
type failureCounts struct {
	mu sync.Mutex
	m  map[string]*failures
}

type failures struct {
	n     int
	since time.Time
}

// add counts one failure of addr at now and returns its failures in the
// window, this one included.
func (f *failureCounts) add(addr string, now time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) > 10000 {
		f.m = map[string]*failures{}
	}
	e := f.m[addr]
	if e == nil || now.Sub(e.since) > time.Minute {
		e = &failures{since: now}
		f.m[addr] = e
	}
	e.n++
	return e.n
}

// endLogin releases what a login in progress holds (a relayed login's
// connection to the cluster); the connection's end calls it too.
func (c *conn) endLogin() {
	if cl, ok := c.sasl.sess.(io.Closer); ok {
		cl.Close()
	}
}
