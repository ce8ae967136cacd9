package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"sync/atomic"
)

// ErrAuthenticationFailed is every failed login: wrong password, unknown
// user, malformed exchange. Its wrapped detail is for tierd's log only;
// a client is told Kafka's generic sentence (ClientMessage).
var ErrAuthenticationFailed = errors.New("sasl: authentication failed")

// ErrUnsupportedMechanism: the mechanism is not enabled.
var ErrUnsupportedMechanism = errors.New("sasl: unsupported mechanism")

// ClientMessage is what a client whose login failed is told, Kafka's
// words (SaslServerAuthenticator): nothing of why.
func ClientMessage(mechanism string) string {
	return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
}

// Session is one login: the client's messages go to Step in turn, until
// done. Not safe for concurrent use.
type Session interface {
	// Step takes the client's next message and returns the reply to send
	// it, and whether the exchange is over. An error (wrapping
	// ErrAuthenticationFailed) ends it failed; reply may then hold the
	// mechanism's error message (SCRAM's "e=...").
	Step(msg []byte) (reply []byte, done bool, err error)
	// Principal is the authenticated client, "User:<name>", once Step
	// has returned done without error.
	Principal() string
}

// Authenticator starts logins.
type Authenticator interface {
	// Mechanisms are the enabled mechanisms, in the order configured.
	Mechanisms() []string
	// Begin starts a login with mechanism; ErrUnsupportedMechanism when
	// it is not enabled.
	Begin(mechanism string) (Session, error)
}

// Local authenticates against a credentials file's credentials, which
// SetCredentials replaces (a reload) for the logins that begin after.
type Local struct {
	mechs  []string
	creds  atomic.Pointer[Credentials]
	secret []byte // for made-up salts of unknown users
}

// NewLocal returns an Authenticator of mechanisms (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512) over creds. Errors: an unknown or repeated mechanism,
// none at all.
func NewLocal(mechanisms []string, creds *Credentials) (*Local, error) {
	if len(mechanisms) == 0 {
		return nil, errors.New("sasl: no mechanism enabled")
	}
	l := &Local{secret: make([]byte, 32)}
	for _, m := range mechanisms {
		m = strings.ToUpper(strings.TrimSpace(m))
		if _, _, ok := hashOf(m); !ok && m != Plain {
			return nil, fmt.Errorf("sasl: mechanism %q: want %s, %s or %s", m, Plain, ScramSHA256, ScramSHA512)
		}
		if slices.Contains(l.mechs, m) {
			return nil, fmt.Errorf("sasl: mechanism %s named twice", m)
		}
		l.mechs = append(l.mechs, m)
	}
	if _, err := rand.Read(l.secret); err != nil {
		return nil, err
	}
	l.SetCredentials(creds)
	return l, nil
}

// SetCredentials replaces the credentials.
func (l *Local) SetCredentials(c *Credentials) { l.creds.Store(c) }

// Mechanisms implements Authenticator.
func (l *Local) Mechanisms() []string { return slices.Clone(l.mechs) }

// Begin implements Authenticator.
func (l *Local) Begin(mechanism string) (Session, error) {
	if !slices.Contains(l.mechs, mechanism) {
		return nil, fmt.Errorf("%w: %q (enabled: %s)", ErrUnsupportedMechanism, mechanism, strings.Join(l.mechs, ", "))
	}
	creds := l.creds.Load()
	if mechanism == Plain {
		return &plainSession{l: l, creds: creds}, nil
	}
	_, h, _ := hashOf(mechanism)
	return &scramSession{mech: mechanism, srv: scramServer{h: h, nonceGen: nonce, lookup: func(user string) (Credential, bool) {
		if c, ok := creds.get(user, mechanism); ok {
			return c, true
		}
		return l.madeUp(h, mechanism, user, creds.shapeOf(mechanism)), false
	}}}, nil
}

// nonce is the server's part of a SCRAM nonce: 32 letters and digits from
// crypto/rand, as Kafka's are letters and digits
// (ScramFormatter.secureRandomString).
func nonce() string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, 32)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// madeUp is the same credential for the same unknown user every time:
// its salt an HMAC of the mechanism and name under this process's
// secret, its salt length and iterations those of the known users'
// credentials (sh), its keys ones no proof matches; so that its exchange
// looks like a known user's.
func (l *Local) madeUp(h func() hash.Hash, mechanism, user string, sh shape) Credential {
	var salt []byte
	for i := byte(0); len(salt) < sh.saltLen; i++ {
		m := hmac.New(h, l.secret)
		m.Write([]byte(mechanism))
		m.Write([]byte{0})
		m.Write([]byte(user))
		m.Write([]byte{0, i})
		salt = m.Sum(salt)
	}
	key := make([]byte, h().Size())
	return Credential{Salt: salt[:sh.saltLen], StoredKey: key, ServerKey: key, Iterations: sh.iterations}
}

type scramSession struct {
	mech string
	srv  scramServer
}

func (s *scramSession) Step(msg []byte) ([]byte, bool, error) {
	reply, done, ok, err := s.srv.step(string(msg))
	switch {
	case err != nil:
		return nil, true, fmt.Errorf("%w: %s: %w", ErrAuthenticationFailed, s.mech, err)
	case done && !ok:
		return nil, true, fmt.Errorf("%w: %s: unknown user %q or a wrong password", ErrAuthenticationFailed, s.mech, s.srv.user)
	}
	return []byte(reply), done, nil
}

func (s *scramSession) Principal() string { return "User:" + s.srv.user }

// saslName decodes a SCRAM saslname (RFC 5802 section 5.1: "=2C" is ',',
// "=3D" is '='); ok is false for any other '='.
func saslName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

type plainSession struct {
	l     *Local
	creds *Credentials
	user  string
}

// Step checks "authzid NUL authcid NUL password" (RFC 4616) in one
// message; authzid, when given, must be authcid (Kafka's rule).
func (p *plainSession) Step(msg []byte) ([]byte, bool, error) {
	user, err := plainUser(msg)
	if err != nil {
		return nil, true, err
	}
	pass := string(bytes.SplitN(msg, []byte{0}, 3)[2])
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		c, ok := p.creds.get(user, mech)
		if !ok {
			continue
		}
		_, h, _ := hashOf(mech)
		stored, _, err := scramKeys(h, pass, c.Salt, c.Iterations)
		if err == nil && hmac.Equal(stored, c.StoredKey) {
			p.user = user
			return nil, true, nil
		}
		return nil, true, fmt.Errorf("%w: PLAIN: user %q: a wrong password", ErrAuthenticationFailed, user)
	}
	// An unknown user costs what a known one does: no quicker answer to
	// tell them apart by.
	mech, h := ScramSHA512, sha512.New
	if p.creds.Len() > 0 && p.creds.shapes[ScramSHA512] == (shape{}) {
		mech, h = ScramSHA256, sha256.New
	}
	c := p.l.madeUp(h, mech, user, p.creds.shapeOf(mech))
	scramKeys(h, pass, c.Salt, c.Iterations)
	return nil, true, fmt.Errorf("%w: PLAIN: unknown user %q", ErrAuthenticationFailed, user)
}

func (p *plainSession) Principal() string { return "User:" + p.user }
