package listener

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/listener/sasl"
)

// blockingAuth is a PLAIN Authenticator whose steps wait for release;
// entered counts the steps begun.
type blockingAuth struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingAuth) Mechanisms() []string { return []string{sasl.Plain} }

func (b *blockingAuth) Begin(string) (sasl.Session, error) { return &blockingSession{b}, nil }

type blockingSession struct{ b *blockingAuth }

func (s *blockingSession) Step([]byte) ([]byte, bool, error) {
	s.b.entered <- struct{}{}
	<-s.b.release
	return nil, true, nil
}

func (s *blockingSession) Principal() string { return "User:alice" }

// TestSASLInflightPerIP: with sasl.max.inflight.logins.per.ip 1, a second
// login from the same address while one is being checked fails at once,
// without its check running; the first then completes.
func TestSASLInflightPerIP(t *testing.T) {
	b := &blockingAuth{entered: make(chan struct{}, 4), release: make(chan struct{})}
	ts := startServer(t, authzLog(t), func(c *Config) {
		c.SASLEnabledMechanisms, c.SASLMaxInflightLoginsPerIP, c.ConnectionFailedAuthenticationDelayMs = []string{sasl.Plain}, 1, 0
	}, WithSASL(b))
	login := func(rc *rawClient) {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, sasl.Plain
		rc.roundTrip(hs)
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 1, []byte("\x00alice\x00pw")
		rc.write(rc.frame(au))
	}
	first, second := dialRaw(t, ts.addr, "a"), dialRaw(t, ts.addr, "b")
	login(first)
	<-b.entered // the first check runs
	login(second)
	_, body, err := second.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("the second login: %v %v, want SASL_AUTHENTICATION_FAILED", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	select {
	case <-b.entered:
		t.Fatal("the second login's check ran")
	default:
	}
	close(b.release)
	_, body, err = first.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp = kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("the first login: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
}
