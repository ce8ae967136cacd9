package sasl

import (
	"encoding/base64"
	"strings"
	"testing"
)

// serverFirst begins a SCRAM login of user and returns the server-first
// message's salt (decoded) and iteration count.
func serverFirst(t *testing.T, a Authenticator, mech, user string) (salt []byte, iters string) {
	t.Helper()
	s, err := a.Begin(mech)
	if err != nil {
		t.Fatal(err)
	}
	reply, done, err := s.Step([]byte("n,,n=" + user + ",r=clientnonce"))
	if err != nil || done {
		t.Fatalf("client-first of %s: %v %v", user, done, err)
	}
	var saltB64 string
	for _, f := range strings.Split(string(reply), ",") {
		switch {
		case strings.HasPrefix(f, "s="):
			saltB64 = f[2:]
		case strings.HasPrefix(f, "i="):
			iters = f[2:]
		}
	}
	if salt, err = base64.StdEncoding.DecodeString(saltB64); err != nil {
		t.Fatalf("server-first %q: %v", reply, err)
	}
	return salt, iters
}

// TestUnknownUserLooksKnown: the server-first message of an unknown user
// has the salt length and iteration count of the users the file holds
// (their commonest), so that it cannot tell a client which user names
// exist; and the same unknown user gets the same salt every time.
func TestUnknownUserLooksKnown(t *testing.T) {
	for _, iters := range []int{4096, 8192} {
		var lines []string
		for _, u := range []string{"alice", "bob", "carol"} {
			for _, m := range []string{ScramSHA256, ScramSHA512} {
				c, err := NewCredential(m, u+"-pw", iters)
				if err != nil {
					t.Fatal(err)
				}
				lines = append(lines, FormatLine(u, m, c))
			}
		}
		creds, err := ParseCredentials(strings.NewReader(strings.Join(lines, "\n")))
		if err != nil {
			t.Fatal(err)
		}
		a, err := NewLocal([]string{ScramSHA256, ScramSHA512}, creds)
		if err != nil {
			t.Fatal(err)
		}
		for _, mech := range []string{ScramSHA256, ScramSHA512} {
			ks, ki := serverFirst(t, a, mech, "alice")
			us, ui := serverFirst(t, a, mech, "mallory")
			if len(ks) != len(us) || ki != ui {
				t.Errorf("%s, %d iterations: a known user's salt is %d bytes, i=%s; an unknown one's %d bytes, i=%s",
					mech, iters, len(ks), ki, len(us), ui)
			}
			again, _ := serverFirst(t, a, mech, "mallory")
			if string(again) != string(us) {
				t.Errorf("%s: an unknown user's salt changes between logins", mech)
			}
		}
	}
}
