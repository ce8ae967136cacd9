package sasl

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdg "github.com/xdg-go/scram"
)

// fileOf makes a credentials file of users -> password for SCRAM-SHA-256
// and SCRAM-SHA-512.
func fileOf(t *testing.T, users map[string]string) *Credentials {
	t.Helper()
	var b strings.Builder
	b.WriteString("# test users\n\n")
	for u, pw := range users {
		for _, m := range []string{ScramSHA256, ScramSHA512} {
			c, err := NewCredential(m, pw, 4096)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(FormatLine(u, m, c) + "\n")
		}
	}
	creds, err := ParseCredentials(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// login runs a franz-go client mechanism (a real Kafka client's SASL)
// against a Session of a, as the listener relays it.
func login(t *testing.T, a Authenticator, name string, m sasl.Mechanism) (string, error) {
	t.Helper()
	s, err := a.Begin(name)
	if err != nil {
		return "", err
	}
	cs, msg, err := m.Authenticate(context.Background(), "tierd")
	if err != nil {
		t.Fatal(err)
	}
	for {
		reply, done, err := s.Step(msg)
		if err != nil {
			return "", err
		}
		cdone, next, cerr := cs.Challenge(reply)
		if cerr != nil {
			return "", cerr
		}
		if done {
			if !cdone && name != Plain {
				t.Fatalf("%s: the server ended the exchange before the client", name)
			}
			return s.Principal(), nil
		}
		msg = next
	}
}

// TestLogins: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 logins of franz-go's
// client against the stored credentials: the right password logs in as
// User:<name>, a wrong password and an unknown user fail alike.
func TestLogins(t *testing.T) {
	creds := fileOf(t, map[string]string{"alice": "alice-pw", "bob,=b": "bob-pw"})
	a, err := NewLocal([]string{Plain, ScramSHA256, "scram-sha-512"}, creds)
	if err != nil {
		t.Fatal(err)
	}
	mechs := func(user, pw string) map[string]sasl.Mechanism {
		return map[string]sasl.Mechanism{
			Plain:       plain.Auth{User: user, Pass: pw}.AsMechanism(),
			ScramSHA256: scram.Auth{User: user, Pass: pw}.AsSha256Mechanism(),
			ScramSHA512: scram.Auth{User: user, Pass: pw}.AsSha512Mechanism(),
		}
	}
	for name, m := range mechs("alice", "alice-pw") {
		if p, err := login(t, a, name, m); err != nil || p != "User:alice" {
			t.Errorf("%s, right password: %q %v", name, p, err)
		}
	}
	for name, m := range mechs("bob,=b", "bob-pw") { // SCRAM's escaped characters in the name
		if p, err := login(t, a, name, m); err != nil || p != "User:bob,=b" {
			t.Errorf("%s, a name with ',' and '=': %q %v", name, p, err)
		}
	}
	for _, who := range [][2]string{{"alice", "Zq9-not-her-secret"}, {"mallory", "alice-pw"}} {
		for name, m := range mechs(who[0], who[1]) {
			_, err := login(t, a, name, m)
			if !errors.Is(err, ErrAuthenticationFailed) && err == nil {
				t.Errorf("%s as %s/%s: logged in", name, who[0], who[1])
			}
			if err != nil && strings.Contains(err.Error(), who[1]) {
				t.Errorf("%s: the password is in the error: %v", name, err)
			}
		}
	}
	if _, err := a.Begin("GSSAPI"); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("GSSAPI: %v", err)
	}
	only, _ := NewLocal([]string{ScramSHA512}, creds)
	if _, err := only.Begin(Plain); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("PLAIN not enabled: %v", err)
	}
}

// TestReload: new credentials apply to the logins that begin after.
func TestReload(t *testing.T) {
	a, _ := NewLocal([]string{ScramSHA256}, fileOf(t, map[string]string{"alice": "old"}))
	a.SetCredentials(fileOf(t, map[string]string{"alice": "new"}))
	if _, err := login(t, a, ScramSHA256, scram.Auth{User: "alice", Pass: "old"}.AsSha256Mechanism()); err == nil {
		t.Error("the old password after a reload")
	}
	if _, err := login(t, a, ScramSHA256, scram.Auth{User: "alice", Pass: "new"}.AsSha256Mechanism()); err != nil {
		t.Errorf("the new password: %v", err)
	}
}

// TestParseCredentialsErrors: each bad line named, no secret in the
// error, nothing returned.
func TestParseCredentialsErrors(t *testing.T) {
	good, _ := NewCredential(ScramSHA256, "pw", 4096)
	line := FormatLine("alice", ScramSHA256, good)
	in := strings.Join([]string{
		line,
		"bob SCRAM-SHA-1 " + strings.SplitN(line, " ", 3)[2],
		"carol SCRAM-SHA-256 salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096",
		strings.Replace(line, "iterations=4096", "iterations=100", 1),
		"dave",
		line,
	}, "\n")
	c, err := ParseCredentials(strings.NewReader(in))
	if c != nil || err == nil {
		t.Fatal("a bad file accepted")
	}
	for _, n := range []string{"line 2", "line 3", "line 4", "line 5", "line 6"} {
		if !strings.Contains(err.Error(), n+":") && !strings.Contains(err.Error(), n+" ") {
			t.Errorf("%s not named: %v", n, err)
		}
	}
	if strings.Contains(err.Error(), "stored_key=") || strings.Contains(err.Error(), "AAAA") {
		t.Errorf("the error shows credential material: %v", err)
	}
	if _, err := NewCredential(ScramSHA256, "pw", 100); err == nil {
		t.Error("100 iterations accepted")
	}
}

// TestAgainstXdgScram: another SCRAM implementation (github.com/xdg-go/scram)
// derives the same stored and server keys from the same salt, and its
// client logs in against this server.
func TestAgainstXdgScram(t *testing.T) {
	for _, m := range []struct {
		name string
		gen  xdg.HashGeneratorFcn
	}{{ScramSHA256, xdg.SHA256}, {ScramSHA512, xdg.SHA512}} {
		c, err := NewCredential(m.name, "pw-ü-1", 4096)
		if err != nil {
			t.Fatal(err)
		}
		cl, _ := m.gen.NewClientUnprepped("alice", "pw-ü-1", "")
		sc := cl.GetStoredCredentials(xdg.KeyFactors{Salt: string(c.Salt), Iters: 4096})
		if !bytes.Equal(sc.StoredKey, c.StoredKey) || !bytes.Equal(sc.ServerKey, c.ServerKey) {
			t.Fatalf("%s: keys differ from xdg-go's", m.name)
		}
		creds, _ := ParseCredentials(strings.NewReader(FormatLine("alice", m.name, c)))
		a, _ := NewLocal([]string{m.name}, creds)
		s, _ := a.Begin(m.name)
		conv := cl.NewConversation()
		msg, _ := conv.Step("")
		for {
			reply, done, err := s.Step([]byte(msg))
			if err != nil {
				t.Fatalf("%s: %v", m.name, err)
			}
			next, cerr := conv.Step(string(reply))
			if cerr != nil {
				t.Fatalf("%s: xdg-go client: %v", m.name, cerr)
			}
			if done {
				if !conv.Valid() || s.Principal() != "User:alice" {
					t.Fatalf("%s: not both sides valid", m.name)
				}
				break
			}
			msg = next
		}
	}
}

// TestLibrdkafkaNonce: as Kafka's ScramSaslServer, a client-final nonce
// that ends with the server's (librdkafka sends its own nonce in front of
// it again, and computes its proof over that message) is accepted; one
// that does not end with it is refused.
func TestLibrdkafkaNonce(t *testing.T) {
	c, _ := NewCredential(ScramSHA256, "pw", 4096)
	creds, _ := ParseCredentials(strings.NewReader(FormatLine("alice", ScramSHA256, c)))
	a, _ := NewLocal([]string{ScramSHA256}, creds)
	for _, tc := range []struct {
		name   string
		nonce  func(cnonce, full string) string
		wantOK bool
	}{
		{"RFC 5802", func(_, full string) string { return full }, true},
		{"librdkafka", func(cnonce, full string) string { return cnonce + full }, true},
		{"another nonce", func(cnonce, _ string) string { return cnonce + "x" }, false},
	} {
		s, _ := a.Begin(ScramSHA256)
		const cnonce = "fyko+d2lbbFgONRv9qkxdawL"
		first := "n,,n=alice,r=" + cnonce
		reply, _, err := s.Step([]byte(first))
		if err != nil {
			t.Fatal(err)
		}
		full := strings.TrimPrefix(strings.SplitN(string(reply), ",", 2)[0], "r=")
		withoutProof := "c=biws,r=" + tc.nonce(cnonce, full)
		salted, _ := pbkdf2.Key(sha256.New, "pw", c.Salt, 4096, 32)
		clientKey := hmacOf(sha256.New, salted, "Client Key")
		sig := hmacOf(sha256.New, c.StoredKey, "n=alice,r="+cnonce+","+string(reply)+","+withoutProof)
		proof := make([]byte, 32)
		for i := range proof {
			proof[i] = clientKey[i] ^ sig[i]
		}
		_, done, err := s.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
		if ok := err == nil && done; ok != tc.wantOK {
			t.Errorf("%s: ok %v (%v), want %v", tc.name, ok, err, tc.wantOK)
		}
	}
}
