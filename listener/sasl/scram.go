package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// The SCRAM exchange is written here, to Kafka's rules, rather than taken
// from a library: Kafka's ScramSaslServer accepts a client-final nonce
// that ends with the server's nonce (librdkafka sends its own nonce in
// front of it again), which RFC 5802 libraries refuse, and Kafka's clients
// depend on that.

// scramKeys derives a SCRAM credential's keys (RFC 5802 section 3):
// SaltedPassword = PBKDF2(HMAC-H, password, salt, i), ClientKey =
// HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey),
// ServerKey = HMAC(SaltedPassword, "Server Key"). The password is its
// UTF-8 bytes, as Kafka's ScramFormatter takes it (no SASLprep).
func scramKeys(h func() hash.Hash, password string, salt []byte, iterations int) (stored, server []byte, err error) {
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return nil, nil, err
	}
	clientKey := hmacOf(h, salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return sum.Sum(nil), hmacOf(h, salted, "Server Key"), nil
}

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// scramServer is one SCRAM-SHA-* exchange, server side: client-first,
// server-first, client-final, server-final (RFC 5802 section 5, no
// channel binding, as Kafka's).
type scramServer struct {
	h        func() hash.Hash
	lookup   func(user string) (Credential, bool)
	nonceGen func() string

	state     int // 0: wants client-first; 1: wants client-final; 2: done
	user      string
	known     bool
	cred      Credential
	c1bare    string // client-first-message-bare
	s1        string // server-first-message
	fullNonce string
}

var errSCRAM = errors.New("malformed SCRAM message")

// step takes one client message and returns the server's; done after the
// client-final message, ok when the proof matched a known user's stored
// key.
func (s *scramServer) step(msg string) (reply string, done, ok bool, err error) {
	switch s.state {
	case 0:
		s.state = 1
		return s.first(msg)
	case 1:
		s.state = 2
		return s.final(msg)
	}
	return "", true, false, errors.New("the SCRAM exchange is over")
}

// first reads the client-first message (parseClientFirst) and answers
// with the server-first message.
func (s *scramServer) first(msg string) (string, bool, bool, error) {
	user, bare, cnonce, err := parseClientFirst(msg)
	if err != nil {
		return "", true, false, err
	}
	s.user, s.c1bare = user, bare
	s.cred, s.known = s.lookup(user)
	s.fullNonce = cnonce + s.nonceGen()
	s.s1 = fmt.Sprintf("r=%s,s=%s,i=%d", s.fullNonce, base64.StdEncoding.EncodeToString(s.cred.Salt), s.cred.Iterations)
	return s.s1, false, false, nil
}

// parseClientFirst reads a client-first message,
// "n,[a=authzid],[m=...,]n=saslname,r=nonce[,ext=...]" (Kafka takes no
// channel binding: the gs2 flag is "n"), returning the user, the
// client-first-message-bare and the client's nonce. Refused: mandatory
// extensions, a delegation token login (tokenauth=true), an authzid that
// is not the user, a nonce that is not printable.
func parseClientFirst(msg string) (user, bare, cnonce string, err error) {
	rest, ok := strings.CutPrefix(msg, "n,")
	if !ok {
		return "", "", "", fmt.Errorf("%w: the gs2 header must be \"n,\" (no channel binding)", errSCRAM)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", "", fmt.Errorf("%w: no client-first-message-bare", errSCRAM)
	}
	fields := strings.Split(bare, ",")
	if len(fields) > 0 && strings.HasPrefix(fields[0], "m=") {
		return "", "", "", fmt.Errorf("%w: mandatory extensions are not supported", errSCRAM)
	}
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") || len(fields[1]) < 3 {
		return "", "", "", fmt.Errorf("%w: want n=<name>,r=<nonce>", errSCRAM)
	}
	for _, ext := range fields[2:] {
		if ext == "tokenauth=true" {
			return "", "", "", fmt.Errorf("%w: delegation tokens are not supported", errSCRAM)
		}
	}
	user, ok = saslName(fields[0][2:])
	if !ok || user == "" {
		return "", "", "", fmt.Errorf("%w: a user name with '=' not escaping ',' or '='", errSCRAM)
	}
	if authz != "" {
		a, ok := saslName(strings.TrimPrefix(authz, "a="))
		if !strings.HasPrefix(authz, "a=") || !ok || a != user {
			return "", "", "", fmt.Errorf("%w: user %q asked to act as another (%q)", ErrAuthenticationFailed, user, authz)
		}
	}
	cnonce = fields[1][2:]
	if !printable(cnonce) {
		return "", "", "", fmt.Errorf("%w: the client nonce is not printable", errSCRAM)
	}
	return user, bare, cnonce, nil
}

// final reads "c=<b64 gs2 header>,r=<nonce>[,...],p=<b64 proof>" and
// checks the proof against the stored key; the nonce must end with the
// server-first nonce (Kafka's rule, ScramSaslServer).
func (s *scramServer) final(msg string) (string, bool, bool, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 || !strings.HasPrefix(msg, "c=") {
		return "", true, false, fmt.Errorf("%w: want c=...,r=...,p=...", errSCRAM)
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[1], "r=") {
		return "", true, false, fmt.Errorf("%w: no nonce in the client-final message", errSCRAM)
	}
	if !strings.HasSuffix(fields[1][2:], s.fullNonce) {
		return "", true, false, fmt.Errorf("%w: the client-final nonce does not end with the server's", errSCRAM)
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != s.h().Size() {
		return "", true, false, fmt.Errorf("%w: the proof is not %d bytes of base64", errSCRAM, s.h().Size())
	}
	authMsg := s.c1bare + "," + s.s1 + "," + withoutProof
	clientSig := hmacOf(s.h, s.cred.StoredKey, authMsg)
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, clientSig)
	sum := s.h()
	sum.Write(clientKey)
	if !s.known || subtle.ConstantTimeCompare(sum.Sum(nil), s.cred.StoredKey) != 1 {
		return "", true, false, nil
	}
	return "v=" + base64.StdEncoding.EncodeToString(hmacOf(s.h, s.cred.ServerKey, authMsg)), true, true, nil
}

// printable: RFC 5802's nonce characters, printable ASCII but ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return s != ""
}
