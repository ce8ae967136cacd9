package listener

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/listener/sasl"
)

// guardLog counts the calls that reach the Log: before a login, none may.
type guardLog struct {
	Log
	calls atomic.Int64
}

func (g *guardLog) Topics(ctx context.Context) ([]Topic, error) {
	g.calls.Add(1)
	return g.Log.Topics(ctx)
}

func (g *guardLog) Offsets(ctx context.Context, tp TopicPartition) (Offsets, error) {
	g.calls.Add(1)
	return g.Log.Offsets(ctx, tp)
}

func (g *guardLog) Read(ctx context.Context, tp TopicPartition, offset int64, maxBytes int, iso Isolation) (ReadResult, error) {
	g.calls.Add(1)
	return g.Log.Read(ctx, tp, offset, maxBytes, iso)
}

func (g *guardLog) OffsetForTimestamp(ctx context.Context, tp TopicPartition, ts int64, iso Isolation) (TimestampOffset, bool, error) {
	g.calls.Add(1)
	return g.Log.OffsetForTimestamp(ctx, tp, ts, iso)
}

func (g *guardLog) MaxTimestamp(ctx context.Context, tp TopicPartition, iso Isolation) (TimestampOffset, bool, error) {
	g.calls.Add(1)
	return g.Log.MaxTimestamp(ctx, tp, iso)
}

func (g *guardLog) LeaderEpochs(ctx context.Context, tp TopicPartition) ([]EpochEntry, error) {
	g.calls.Add(1)
	return g.Log.LeaderEpochs(ctx, tp)
}

// FuzzSASL writes an arbitrary byte stream, as frames, to a SASL
// listener's connection (net.Pipe) and lets the connection state machine
// read it to its end: no panic; unless a login succeeded, no request
// but ApiVersions and the SASL exchange was handled and the Log was
// never asked anything. (Whether a password reaches the log is
// TestSASLLogins's: a fuzzed stream may hold it in a client id.) The seeds
// are real exchanges (PLAIN v0 and v1, SCRAM's first message, re-login)
// and out-of-order ones, each followed by requests.
func FuzzSASL(f *testing.F) {
	for _, s := range saslSeeds() {
		f.Add(s)
	}
	c, err := sasl.NewCredential(sasl.ScramSHA256, "alice-pw", 4096)
	if err != nil {
		f.Fatal(err)
	}
	creds, err := sasl.ParseCredentials(strings.NewReader(sasl.FormatLine("alice", sasl.ScramSHA256, c)))
	if err != nil {
		f.Fatal(err)
	}
	auth, err := sasl.NewLocal([]string{sasl.Plain, sasl.ScramSHA256}, creds)
	if err != nil {
		f.Fatal(err)
	}
	base := smallLog(f)
	cfg := DefaultConfig()
	cfg.SASLEnabledMechanisms = []string{sasl.Plain, sasl.ScramSHA256}
	cfg.ConnectionFailedAuthenticationDelayMs = 0
	cfg.ConnectionsMaxReauthMs = 60000
	cfg.SASLServerMaxReceiveSize = 4096
	f.Fuzz(func(t *testing.T, stream []byte) {
		gl := &guardLog{Log: base}
		reg := prometheus.NewRegistry()
		srv, err := New(cfg, gl, WithSASL(auth), WithRegisterer(reg),
			WithLogger(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		if err != nil {
			t.Fatal(err)
		}
		srv.advHost, srv.advPort = "127.0.0.1", 9192
		client, server := net.Pipe()
		stopping := make(chan struct{})
		close(stopping) // long polls answer at once
		cn := srv.newConn(server, stopping)
		done := make(chan struct{})
		go func() { cn.serve(context.Background()); close(done) }()
		go io.Copy(io.Discard, client)
		client.Write(stream) // returns once the server has read it all, or closed
		client.Close()
		<-done
		ok := testutil.ToFloat64(srv.m.logins.WithLabelValues(sasl.Plain, "ok")) +
			testutil.ToFloat64(srv.m.logins.WithLabelValues(sasl.ScramSHA256, "ok"))
		if ok == 0 {
			if n := gl.calls.Load(); n > 0 {
				t.Fatalf("the Log was asked %d times without a login", n)
			}
			for _, a := range served {
				if a.key == int16(kmsg.ApiVersions) {
					continue
				}
				for v := a.min; v <= a.max; v++ {
					if n := testutil.ToFloat64(srv.m.requests.WithLabelValues(kmsg.NameForKey(a.key), itoa(v))); n > 0 {
						t.Fatalf("%s v%d handled without a login", kmsg.NameForKey(a.key), v)
					}
				}
			}
		}
	})
}

func itoa(v int16) string { return strconv.Itoa(int(v)) }

// saslSeeds are byte streams of size-prefixed frames.
func saslSeeds() [][]byte {
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed"))
	corr := int32(0)
	req := func(r kmsg.Request, v int16) []byte {
		corr++
		r.SetVersion(v)
		return fmtr.AppendRequest(nil, r, corr)
	}
	raw := func(tok string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...) }
	hs := func(v int16, mech string) []byte {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Mechanism = mech
		return req(r, v)
	}
	au := func(v int16, tok string) []byte {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.SASLAuthBytes = []byte(tok)
		return req(r, v)
	}
	md := func() []byte { return req(metadataReq(0, kmsg.StringPtr("t")), 9) }
	fetch := func() []byte {
		return req(fetchReq{maxBytes: 1 << 20, partMax: 1 << 20, minBytes: 1, iso: 0, topic: "t", offsets: map[int32]int64{0: 0}}.build(), 11)
	}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	plainOK, plainBad := "\x00alice\x00alice-pw", "\x00alice\x00nope"
	return [][]byte{
		cat(req(apiVersions(3), 3), md()),
		cat(hs(1, "PLAIN"), au(2, plainOK), md(), fetch()),
		cat(hs(1, "PLAIN"), au(2, plainBad), md()),
		cat(hs(0, "PLAIN"), raw(plainOK), md()),
		cat(hs(0, "PLAIN"), md()),                 // a request where a raw token belongs
		cat(hs(1, "PLAIN"), md()),                 // a request in the middle of the exchange
		cat(hs(1, "PLAIN"), hs(1, "PLAIN"), md()), // a second handshake
		cat(au(1, plainOK), md()),                 // SaslAuthenticate without a handshake
		cat(hs(1, "SCRAM-SHA-256"), au(1, "n,,n=alice,r=abcdefgh"), au(1, "c=biws,r=abcdefgh,p=AAAA"), md()),
		cat(hs(0, "SCRAM-SHA-256"), raw("n,,n=alice,r=abcdefgh"), raw("c=biws,r=x,p=AAAA"), md()),
		cat(hs(1, "PLAIN"), au(1, plainOK), hs(0, "PLAIN"), raw(plainOK), md()), // re-login with v0
		cat(hs(1, "PLAIN"), au(1, plainOK), hs(1, "PLAIN"), au(1, "\x00bob\x00x"), md()),
		cat(req(apiVersions(9), 9), req(apiVersions(0), 0), fetch()),
	}
}

// TestSASLSeedsReach: the seeds reach what they are for: the good PLAIN
// logins (v1, v0) log in and are then served by the Log; the others are
// stopped before it.
func TestSASLSeedsReach(t *testing.T) {
	c, _ := sasl.NewCredential(sasl.ScramSHA256, "alice-pw", 4096)
	creds, _ := sasl.ParseCredentials(strings.NewReader(sasl.FormatLine("alice", sasl.ScramSHA256, c)))
	auth, _ := sasl.NewLocal([]string{sasl.Plain, sasl.ScramSHA256}, creds)
	cfg := DefaultConfig()
	cfg.SASLEnabledMechanisms = []string{sasl.Plain, sasl.ScramSHA256}
	cfg.ConnectionFailedAuthenticationDelayMs = 0
	for i, s := range saslSeeds() {
		gl := &guardLog{Log: smallLog(t)}
		srv, err := New(cfg, gl, WithSASL(auth))
		if err != nil {
			t.Fatal(err)
		}
		client, server := net.Pipe()
		stopping := make(chan struct{})
		close(stopping)
		cn := srv.newConn(server, stopping)
		done := make(chan struct{})
		go func() { cn.serve(context.Background()); close(done) }()
		go io.Copy(io.Discard, client)
		client.Write(s)
		client.Close()
		<-done
		served := gl.calls.Load() > 0
		if want := i == 1 || i == 3; served != want { // seed 10 re-logs in with v0: refused
			t.Errorf("seed %d: the Log asked %v, want %v", i, served, want)
		}
	}
}
