package sasl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// ErrUnavailable: the store of credentials (the Kafka cluster) could not
// be asked, so the login fails without the client being at fault. It is
// always wrapped together with ErrAuthenticationFailed.
var ErrUnavailable = errors.New("sasl: the Kafka cluster could not be asked")

// Upstream begins logins at the Kafka cluster: each a connection of its
// own on which SaslHandshake(mechanism) was answered without error.
type Upstream interface {
	BeginLogin(ctx context.Context, mechanism string) (UpstreamLogin, error)
}

// UpstreamLogin is one login at the cluster. Step sends one
// SaslAuthenticate with msg and returns the cluster's bytes; an error
// wrapping ErrAuthenticationFailed means the cluster refused the login,
// any other that it could not be asked.
type UpstreamLogin interface {
	Step(ctx context.Context, msg []byte) ([]byte, error)
	Close() error
}

// Relay authenticates a client by relaying its SASL exchange to the Kafka
// cluster, so that exactly the users the cluster accepts are accepted,
// with the passwords and SCRAM credentials the cluster has now (a user
// deleted there is refused at its next login), and tierd keeps no copy.
// PLAIN's one message goes to the cluster as it came; SCRAM's four go
// back and forth unchanged: Kafka's SCRAM takes no channel binding, so
// the proof is the same over two connections. The principal is
// "User:" and the user the client named (PLAIN's authcid, SCRAM's
// n=), as the cluster's is.
//
// Refused before the cluster is asked: a malformed message, an authzid
// that is not the user, and any SCRAM extension (a delegation token's
// tokenauth=true would log in as the token's owner, not the name given).
// While the cluster cannot be reached, new logins fail (ErrUnavailable)
// within Timeout; connections already logged in go on until they close or
// must log in again (connections.max.reauth.ms).
type Relay struct {
	up    Upstream
	mechs []string
	// Timeout bounds one login at the cluster, from its connection to
	// its last answer. Default 10s.
	Timeout time.Duration
	// MaxInflight bounds the logins at the cluster in progress at once
	// (each holds a connection to it); one past it fails at once, as
	// ErrUnavailable. Set before the first Begin. Default 64.
	MaxInflight int
	inflight    atomic.Int64
}

// NewRelay returns a Relay of mechanisms to up. Errors as NewLocal's.
func NewRelay(mechanisms []string, up Upstream) (*Relay, error) {
	l, err := NewLocal(mechanisms, &Credentials{})
	if err != nil {
		return nil, err
	}
	return &Relay{up: up, mechs: l.mechs, Timeout: 10 * time.Second, MaxInflight: 64}, nil
}

// Mechanisms implements Authenticator.
func (r *Relay) Mechanisms() []string { return slices.Clone(r.mechs) }

// Begin implements Authenticator.
func (r *Relay) Begin(mechanism string) (Session, error) {
	if !slices.Contains(r.mechs, mechanism) {
		return nil, fmt.Errorf("%w: %q (enabled: %s)", ErrUnsupportedMechanism, mechanism, strings.Join(r.mechs, ", "))
	}
	return &relaySession{r: r, mech: mechanism, deadline: time.Now().Add(r.Timeout)}, nil
}

// relaySession is one relayed login.
type relaySession struct {
	r        *Relay
	mech     string
	deadline time.Time
	up       UpstreamLogin
	user     string
	steps    int
}

// Step implements Session.
func (s *relaySession) Step(msg []byte) ([]byte, bool, error) {
	s.steps++
	switch {
	case s.mech == Plain:
		user, err := plainUser(msg)
		if err != nil {
			return nil, true, err
		}
		if _, err := s.ask(msg); err != nil {
			return nil, true, err
		}
		s.user = user
		return nil, true, nil
	case s.steps == 1:
		user, bare, _, err := parseClientFirst(string(msg))
		if err != nil && !errors.Is(err, ErrAuthenticationFailed) {
			err = fmt.Errorf("%w: %w", ErrAuthenticationFailed, err)
		}
		if err != nil {
			return nil, true, err
		}
		if strings.Count(bare, ",") != 1 {
			return nil, true, fmt.Errorf("%w: SCRAM: extensions are not relayed to the cluster", ErrAuthenticationFailed)
		}
		reply, err := s.ask(msg)
		if err != nil {
			return nil, true, err
		}
		s.user = user
		return reply, false, nil
	case s.steps == 2:
		reply, err := s.ask(msg)
		if err != nil {
			return nil, true, err
		}
		return reply, true, nil
	}
	return nil, true, fmt.Errorf("%w: SCRAM: a message after the exchange ended", ErrAuthenticationFailed)
}

// ask sends msg to the cluster, beginning its login the first time.
func (s *relaySession) ask(msg []byte) ([]byte, error) {
	ctx, cancel := context.WithDeadline(context.Background(), s.deadline)
	defer cancel()
	if s.up == nil {
		if n := s.r.inflight.Add(1); n > int64(s.r.MaxInflight) {
			s.r.inflight.Add(-1)
			return nil, fmt.Errorf("%w: %w: %d logins at the cluster in progress already", ErrAuthenticationFailed, ErrUnavailable, s.r.MaxInflight)
		}
		up, err := s.r.up.BeginLogin(ctx, s.mech)
		if err != nil {
			s.r.inflight.Add(-1)
			return nil, classify(err)
		}
		s.up = up
	}
	reply, err := s.up.Step(ctx, msg)
	if err != nil {
		return nil, classify(err)
	}
	return reply, nil
}

// classify keeps a refusal a refusal and makes anything else
// ErrUnavailable.
func classify(err error) error {
	if errors.Is(err, ErrAuthenticationFailed) {
		return err
	}
	return fmt.Errorf("%w: %w: %w", ErrAuthenticationFailed, ErrUnavailable, err)
}

// Principal implements Session.
func (s *relaySession) Principal() string { return "User:" + s.user }

// Close ends the cluster's login, if one began.
func (s *relaySession) Close() error {
	if s.up == nil {
		return nil
	}
	err := s.up.Close()
	s.up = nil
	s.r.inflight.Add(-1)
	return err
}

// plainUser checks a PLAIN message's form (RFC 4616, Kafka's rule that an
// authzid must be the authcid) and returns the authcid.
func plainUser(msg []byte) (string, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 || len(parts[2]) == 0 {
		return "", fmt.Errorf("%w: PLAIN: malformed message", ErrAuthenticationFailed)
	}
	if authz, user := string(parts[0]), string(parts[1]); authz != "" && authz != user {
		return "", fmt.Errorf("%w: PLAIN: user %q asked to act as %q", ErrAuthenticationFailed, user, authz)
	}
	return string(parts[1]), nil
}
