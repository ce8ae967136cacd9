package listener

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/listener/sasl"
)

// TestSASLTimeoutSlowFrame: a client that never logs in but keeps a
// request frame trickling in, a byte at a time within every idle bound,
// is still closed at sasl.authentication.timeout.ms: the login deadline
// bounds the whole connection before login, not each read. (Else a few
// such clients hold max.connections pre-login indefinitely.)
func TestSASLTimeoutSlowFrame(t *testing.T) {
	ts := saslServer(t, func(c *Config) { c.SASLAuthenticationTimeoutMs = 300 })
	rc := dialRaw(t, ts.addr, "slow")
	const size = 60 // 60 bytes at one per 100 ms: 6 s, far past the 300 ms login bound
	rc.write(binary.BigEndian.AppendUint32(nil, size))
	closed := make(chan struct{})
	go func() { // the server closing shows as end of file here
		io.Copy(io.Discard, rc.c)
		close(closed)
	}()
	sent := 0
	for ; sent < size; sent++ {
		select {
		case <-closed:
		case <-time.After(100 * time.Millisecond):
			if _, err := rc.c.Write([]byte{0}); err == nil {
				continue
			}
		}
		break
	}
	if sent == size {
		t.Fatalf("a frame trickled in for %d bytes; the connection was not closed at the login timeout", size)
	}
	<-closed
	waitFor(t, "sasl_timeout counted", func() bool { return ts.closed(reasonSASLTimeout) >= 1 })

}

// TestSASLReauthStalled: a logged-in client that begins a
// re-authentication (KIP-368) and stops in its middle is closed at
// sasl.authentication.timeout.ms, as a first login is, not after
// connections.max.idle.ms: a relayed login holds a connection to the
// Kafka cluster until the exchange ends, so a few clients stalling there
// would otherwise hold many of the cluster's connections for minutes.
func TestSASLReauthStalled(t *testing.T) {
	ts := saslServer(t, func(c *Config) { c.SASLAuthenticationTimeoutMs = 300 })
	rc := dialRaw(t, ts.addr, "reauth")
	login := func(mech string, msg []byte) *kmsg.SASLAuthenticateResponse {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, mech
		if hr := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
			t.Fatalf("SaslHandshake %s: %v", mech, kerr.ErrorForCode(hr.ErrorCode))
		}
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 1, msg
		return rc.roundTrip(au).(*kmsg.SASLAuthenticateResponse)
	}
	if r := login(sasl.Plain, []byte("\x00alice\x00alice-pw")); r.ErrorCode != 0 {
		t.Fatalf("PLAIN login: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Past the first login's deadline: the connection is logged in.
	time.Sleep(400 * time.Millisecond)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	if mr := rc.roundTrip(md).(*kmsg.MetadataResponse); len(mr.Topics) != 1 {
		t.Fatalf("alice sees %d topics", len(mr.Topics))
	}
	// A re-authentication whose client-first message is answered, then
	// nothing: the client-final never comes.
	if r := login(sasl.ScramSHA256, []byte("n,,n=alice,r=abcdefghijklmnop")); r.ErrorCode != 0 {
		t.Fatalf("SCRAM client-first: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	rc.expectClosed()
	if ts.closed(reasonSASLTimeout) < 1 {
		t.Error("a stalled re-authentication not closed as sasl_timeout")
	}
}
