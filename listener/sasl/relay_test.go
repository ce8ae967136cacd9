package sasl

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// localUpstream is a cluster made of a Local authenticator: each login a
// Local session, as a broker's would be. down makes it unreachable.
type localUpstream struct {
	l      *Local
	mu     sync.Mutex
	down   bool
	begun  int
	closed int
	msgs   []string
}

type localLogin struct {
	u *localUpstream
	s Session
}

func (u *localUpstream) BeginLogin(_ context.Context, mech string) (UpstreamLogin, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.down {
		return nil, errors.New("dial tcp 10.0.0.1:9092: connection refused")
	}
	s, err := u.l.Begin(mech)
	if err != nil {
		return nil, err
	}
	u.begun++
	return &localLogin{u: u, s: s}, nil
}

func (l *localLogin) Step(_ context.Context, msg []byte) ([]byte, error) {
	l.u.mu.Lock()
	l.u.msgs = append(l.u.msgs, string(msg))
	l.u.mu.Unlock()
	reply, _, err := l.s.Step(msg)
	return reply, err
}

func (l *localLogin) Close() error {
	l.u.mu.Lock()
	defer l.u.mu.Unlock()
	l.u.closed++
	return nil
}

// A relayed login is judged by the upstream alone: the right password
// logs in as User:<name> with every mechanism, a wrong one and an unknown
// user fail, a user removed upstream fails at its next login, and every
// upstream login is closed. An unreachable upstream fails the login as
// ErrUnavailable.
func TestRelay(t *testing.T) {
	creds := fileOf(t, map[string]string{"alice": "alice-pw", "bob": "bob-pw"})
	local, err := NewLocal([]string{Plain, ScramSHA256, ScramSHA512}, creds)
	if err != nil {
		t.Fatal(err)
	}
	up := &localUpstream{l: local}
	r, err := NewRelay([]string{Plain, ScramSHA256, ScramSHA512}, up)
	if err != nil {
		t.Fatal(err)
	}
	relayLogin := func(mech, user, pw string) (string, error) {
		switch mech {
		case Plain:
			return loginClosing(t, r, mech, plain.Auth{User: user, Pass: pw}.AsMechanism())
		case ScramSHA256:
			return loginClosing(t, r, mech, scram.Auth{User: user, Pass: pw}.AsSha256Mechanism())
		}
		return loginClosing(t, r, mech, scram.Auth{User: user, Pass: pw}.AsSha512Mechanism())
	}
	for _, mech := range []string{Plain, ScramSHA256, ScramSHA512} {
		if p, err := relayLogin(mech, "alice", "alice-pw"); err != nil || p != "User:alice" {
			t.Errorf("%s alice: %q %v", mech, p, err)
		}
		for _, bad := range [][2]string{{"alice", "wrong"}, {"mallory", "x"}} {
			if _, err := relayLogin(mech, bad[0], bad[1]); !errors.Is(err, ErrAuthenticationFailed) || errors.Is(err, ErrUnavailable) {
				t.Errorf("%s %s: %v, want a refusal", mech, bad[0], err)
			}
		}
	}
	local.SetCredentials(fileOf(t, map[string]string{"bob": "bob-pw"})) // alice deleted in the cluster
	if _, err := relayLogin(ScramSHA512, "alice", "alice-pw"); !errors.Is(err, ErrAuthenticationFailed) {
		t.Errorf("alice after her deletion upstream: %v", err)
	}
	if up.begun != up.closed || up.begun == 0 {
		t.Errorf("%d upstream logins begun, %d closed", up.begun, up.closed)
	}
	up.down = true
	if _, err := relayLogin(ScramSHA256, "bob", "bob-pw"); !errors.Is(err, ErrAuthenticationFailed) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("upstream down: %v, want ErrUnavailable", err)
	}
}

// loginClosing is login, closing the session at the end as the
// listener does.
func loginClosing(t *testing.T, a Authenticator, name string, m sasl.Mechanism) (string, error) {
	t.Helper()
	var sess Session
	p, err := login(t, sessionKeeper{a, &sess}, name, m)
	if c, ok := sess.(interface{ Close() error }); ok {
		c.Close()
	}
	return p, err
}

// sessionKeeper is a with the session it began kept.
type sessionKeeper struct {
	Authenticator
	s *Session
}

func (k sessionKeeper) Begin(m string) (Session, error) {
	s, err := k.Authenticator.Begin(m)
	*k.s = s
	return s, err
}

// The relay refuses, before asking the cluster, a SCRAM extension (a
// delegation token's login would be the token owner's), an authzid that
// is not the user, and a malformed PLAIN message; messages go upstream
// unchanged.
func TestRelayRefusesBeforeAsking(t *testing.T) {
	local, _ := NewLocal([]string{Plain, ScramSHA256}, fileOf(t, map[string]string{"alice": "pw"}))
	up := &localUpstream{l: local}
	r, _ := NewRelay([]string{Plain, ScramSHA256}, up)
	for _, tc := range []struct{ mech, msg string }{
		{ScramSHA256, "n,,n=alice,r=abcdefgh,tokenauth=true"},
		{ScramSHA256, "n,,n=alice,r=abcdefgh,ext=1"},
		{ScramSHA256, "n,a=bob,n=alice,r=abcdefgh"},
		{ScramSHA256, "p=tls-unique,,n=alice,r=abcdefgh"},
		{Plain, "bob\x00alice\x00pw"},
		{Plain, "alice\x00pw"},
	} {
		s, err := r.Begin(tc.mech)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Step([]byte(tc.msg)); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s %q: %v", tc.mech, tc.msg, err)
		}
	}
	if up.begun != 0 {
		t.Fatalf("the cluster was asked %d times", up.begun)
	}
	if _, err := loginClosing(t, r, ScramSHA256, scram.Auth{User: "alice", Pass: "pw"}.AsSha256Mechanism()); err != nil {
		t.Fatal(err)
	}
	if len(up.msgs) != 2 || !strings.HasPrefix(up.msgs[0], "n,,n=alice,r=") || !strings.HasPrefix(up.msgs[1], "c=biws,r=") {
		t.Fatalf("upstream saw %q", up.msgs)
	}
}

// At most MaxInflight logins hold a connection to the cluster at once;
// one past it fails at once as ErrUnavailable, and a closed login frees
// its place.
func TestRelayMaxInflight(t *testing.T) {
	local, _ := NewLocal([]string{ScramSHA256}, fileOf(t, map[string]string{"alice": "pw"}))
	up := &localUpstream{l: local}
	r, _ := NewRelay([]string{ScramSHA256}, up)
	r.MaxInflight = 1
	first := "n,,n=alice,r=abcdefghijkl"
	a, _ := r.Begin(ScramSHA256)
	if _, _, err := a.Step([]byte(first)); err != nil {
		t.Fatal(err)
	}
	b, _ := r.Begin(ScramSHA256)
	if _, _, err := b.Step([]byte(first)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a second login at the cluster: %v, want ErrUnavailable", err)
	}
	b.(interface{ Close() error }).Close() // began nothing: frees nothing
	a.(interface{ Close() error }).Close()
	c, _ := r.Begin(ScramSHA256)
	if _, _, err := c.Step([]byte(first)); err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	c.(interface{ Close() error }).Close()
	if up.begun != 2 || up.closed != 2 || r.inflight.Load() != 0 {
		t.Fatalf("begun %d, closed %d, in flight %d", up.begun, up.closed, r.inflight.Load())
	}
}
