package listener

import (
	"encoding/binary"
	"io"
	"testing"
	"time"
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
