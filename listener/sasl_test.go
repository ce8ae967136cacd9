package listener

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/listener/sasl"
)

// saslServer serves authzLog on a SASL listener with all three
// mechanisms; alice (password alice-pw) may read orders, nobody else
// anything.
func saslServer(t *testing.T, mod func(*Config), extra ...Option) *testServer {
	t.Helper()
	mechs := []string{sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512}
	auth := aliceAuth(t, mechs)
	set, _ := kafkaacl.NewSet([]kafkaacl.ACL{{ResourceType: kafkaacl.ResourceTopic, ResourceName: "orders", PatternType: kafkaacl.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: kafkaacl.OpRead, Permission: kafkaacl.Allow}})
	return startServer(t, authzLog(t), func(c *Config) {
		c.SASLEnabledMechanisms = mechs
		c.ConnectionFailedAuthenticationDelayMs = 1
		if mod != nil {
			mod(c)
		}
	}, append([]Option{WithSASL(auth), WithAuthorizer(staticAuthz{set})}, extra...)...)
}

// aliceAuth is a credentials file's Authenticator of mechs holding one
// user, alice (password alice-pw), with SCRAM-SHA-256 and SCRAM-SHA-512
// credentials of 4096 iterations (Kafka's least for SCRAM).
func aliceAuth(t testing.TB, mechs []string) *sasl.Local {
	t.Helper()
	var lines []string
	for _, m := range []string{sasl.ScramSHA256, sasl.ScramSHA512} {
		c, err := sasl.NewCredential(m, "alice-pw", 4096)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, sasl.FormatLine("alice", m, c))
	}
	creds, err := sasl.ParseCredentials(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := sasl.NewLocal(mechs, creds)
	if err != nil {
		t.Fatal(err)
	}
	return auth
}

func readOrders(t *testing.T, addr string, opts ...kgo.Opt) (int, error) {
	t.Helper()
	cl := newKgo(t, addr, append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}),
		kgo.RequestRetries(0)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		return 0, err
	}
	return fs.NumRecords(), nil
}

// TestSASLLogins: franz-go logs in with each mechanism and reads what its
// principal may; a wrong password is answered SASL_AUTHENTICATION_FAILED
// with Kafka's sentence, and counted.
func TestSASLLogins(t *testing.T) {
	ts := saslServer(t, nil)
	for name, m := range map[string]kgo.Opt{
		"PLAIN":         kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()),
		"SCRAM-SHA-256": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()),
		"SCRAM-SHA-512": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()),
	} {
		if n, err := readOrders(t, ts.addr, m); err != nil || n != 1 {
			t.Errorf("%s: %d records, %v", name, n, err)
		}
	}
	bad := newKgo(t, ts.addr, kgo.RequestRetries(0), kgo.SASL(scram.Auth{User: "alice", Pass: "Zq9-not-hers"}.AsSha256Mechanism()))
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), bad)
	if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") || !strings.Contains(err.Error(), sasl.ClientMessage("SCRAM-SHA-256")) {
		t.Errorf("a wrong password: %v", err)
	}
	if v := testutil.ToFloat64(ts.srv.m.logins.WithLabelValues("SCRAM-SHA-256", "failed")); v < 1 {
		t.Errorf("failed logins counted %v", v)
	}
	if strings.Contains(ts.logs.String(), "Zq9-not-hers") || strings.Contains(ts.logs.String(), "alice-pw") {
		t.Errorf("a password in the log:\n%s", ts.logs.String())
	}
	if !strings.Contains(ts.logs.String(), "Kafka login failed") {
		t.Errorf("the failed login not logged:\n%s", ts.logs.String())
	}
}

// TestSASLRawExchanges: what a client that does not follow the exchange
// gets: a request before login closes the connection; ApiVersions is
// answered before login and lists the SASL APIs; an unsupported mechanism
// is answered with the enabled ones and closed; a v0 handshake's raw
// PLAIN token logs in (an empty token back) and the client is then
// served as its principal; a connection that never logs in is closed at
// sasl.authentication.timeout.ms; a frame above
// sasl.server.max.receive.size before login is refused.
func TestSASLRawExchanges(t *testing.T) {
	ts := saslServer(t, func(c *Config) { c.SASLAuthenticationTimeoutMs = 300; c.SASLServerMaxReceiveSize = 4096 })

	rc := dialRaw(t, ts.addr, "raw")
	av := rc.roundTrip(apiVersions(3)).(*kmsg.ApiVersionsResponse)
	keys := map[int16]bool{}
	for _, k := range av.ApiKeys {
		keys[k.ApiKey] = true
	}
	if !keys[int16(kmsg.SASLHandshake)] || !keys[int16(kmsg.SASLAuthenticate)] {
		t.Errorf("ApiVersions before login lists no SASL APIs: %v", av.ApiKeys)
	}
	rc.write(rc.frame(kmsg.NewPtrMetadataRequest()))
	rc.expectClosed()
	if ts.closed(reasonSASLState) < 1 {
		t.Error("a Metadata before login not counted as sasl_illegal_state")
	}

	rc = dialRaw(t, ts.addr, "raw")
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	hr := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse)
	if hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hr.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Errorf("GSSAPI: %v %v", kerr.ErrorForCode(hr.ErrorCode), hr.SupportedMechanisms)
	}
	rc.expectClosed()

	rc = dialRaw(t, ts.addr, "raw")
	hs.Version, hs.Mechanism = 0, "PLAIN"
	if hr := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		t.Fatalf("PLAIN v0: %v", kerr.ErrorForCode(hr.ErrorCode))
	}
	tok := []byte("\x00alice\x00alice-pw")
	rc.write(binary.BigEndian.AppendUint32(nil, uint32(len(tok))))
	rc.write(tok)
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := rc.c.Read(size[:]); err != nil || binary.BigEndian.Uint32(size[:]) != 0 {
		t.Fatalf("v0 PLAIN reply: %v %v", size, err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mr := rc.roundTrip(md).(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || *mr.Topics[0].Topic != "orders" {
		t.Errorf("alice after a v0 login sees %d topics", len(mr.Topics))
	}

	rc = dialRaw(t, ts.addr, "raw") // says nothing
	rc.expectClosed()
	if ts.closed(reasonSASLTimeout) < 1 {
		t.Error("a silent connection not closed as sasl_timeout")
	}

	rc = dialRaw(t, ts.addr, "raw")
	rc.write(binary.BigEndian.AppendUint32(nil, 8192))
	rc.expectClosed()
}

// TestSASLReauthentication: with connections.max.reauth.ms, franz-go is
// told the login's lifetime and logs in again before it ends, reading on;
// a client that does not is closed at its first request after it.
func TestSASLReauthentication(t *testing.T) {
	ts := saslServer(t, func(c *Config) { c.ConnectionsMaxReauthMs = 400 })
	cl := newKgo(t, ts.addr, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()))
	for i := 0; i < 8; i++ {
		req := kmsg.NewPtrMetadataRequest()
		if _, err := req.RequestWith(context.Background(), cl); err != nil {
			t.Fatalf("Metadata %d: %v", i, err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	if v := testutil.ToFloat64(ts.srv.m.logins.WithLabelValues("SCRAM-SHA-256", "ok")); v < 2 {
		t.Errorf("logins %v: franz-go did not log in again", v)
	}

	rc := dialRaw(t, ts.addr, "raw")
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	rc.roundTrip(hs)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00alice\x00alice-pw")
	ar := rc.roundTrip(au).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > 400 {
		t.Fatalf("login: %v, lifetime %d ms", kerr.ErrorForCode(ar.ErrorCode), ar.SessionLifetimeMillis)
	}
	time.Sleep(time.Duration(ar.SessionLifetimeMillis+100) * time.Millisecond)
	rc.write(rc.frame(kmsg.NewPtrMetadataRequest()))
	rc.expectClosed()
	if ts.closed(reasonReauth) < 1 {
		t.Error("not closed as sasl_reauthentication")
	}
}
