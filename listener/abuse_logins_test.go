package listener

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/listener/sasl"
)

// withFailureDelayed sets Server.failureDelayed (see there).
func withFailureDelayed(f func(remote string, failures int, delay time.Duration)) Option {
	return func(s *Server) { s.failureDelayed = f }
}

// countingAuth wraps an Authenticator and counts its sessions' Steps
// (each PLAIN Step is one password check): all of them, and the most
// running at once. Each Step takes at least hold more (a slower check,
// so that checks overlap when nothing bounds them).
type countingAuth struct {
	sasl.Authenticator
	hold                 time.Duration
	running, most, steps atomic.Int64
}

func (a *countingAuth) Begin(mechanism string) (sasl.Session, error) {
	s, err := a.Authenticator.Begin(mechanism)
	if err != nil {
		return nil, err
	}
	return &countingSession{Session: s, a: a}, nil
}

type countingSession struct {
	sasl.Session
	a *countingAuth
}

func (s *countingSession) Step(msg []byte) ([]byte, bool, error) {
	n := s.a.running.Add(1)
	defer s.a.running.Add(-1)
	s.a.steps.Add(1)
	for m := s.a.most.Load(); n > m && !s.a.most.CompareAndSwap(m, n); m = s.a.most.Load() {
	}
	time.Sleep(s.a.hold)
	return s.Session.Step(msg)
}

// loginResult is what one raw PLAIN login saw.
type loginResult struct {
	local   string        // the client's address, as the server names it (remote)
	ok      bool          // logged in
	refused bool          // answered SASL_AUTHENTICATION_FAILED (else closed without an answer)
	waited  time.Duration // from just before the SaslAuthenticate was written to its answer (or the close)
	// held is what the server held this login against (failures, delay
	// in ns), read with the connection still open: its address cannot
	// belong to a later connection yet (client ports are reused).
	held   [2]int64
	heldOK bool
}

// plainLogin logs in to addr with PLAIN over a new connection
// (SaslHandshake v1, SaslAuthenticate v1) and closes it. A failed login
// must end with the connection closed by the server; an error says what
// else happened. held, when not nil, is asked for what the server held
// the login against once the answer (or the close) came.
func plainLogin(addr, user, pass string, held func(local string) ([2]int64, bool)) (loginResult, error) {
	var res loginResult
	nc, err := net.DialTimeout("tcp", addr, 20*time.Second)
	if err != nil {
		return res, fmt.Errorf("dial: %w", err)
	}
	defer nc.Close()
	res.local = nc.LocalAddr().String()
	rc := &rawClient{c: nc, id: "login"}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.Plain
	if _, err := nc.Write(rc.frame(hs)); err != nil {
		return res, fmt.Errorf("SaslHandshake: %w", err)
	}
	_, body, err := rc.readFrame()
	if err != nil {
		return res, fmt.Errorf("SaslHandshake: %w", err)
	}
	hr := hs.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if err := hr.ReadFrom(body); err != nil || hr.ErrorCode != 0 {
		return res, fmt.Errorf("SaslHandshake: %w (%w)", err, kerr.ErrorForCode(hr.ErrorCode))
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00"+user+"\x00"+pass)
	sent := time.Now() // before the write: the server may read the request before Write returns
	if _, err := nc.Write(rc.frame(au)); err != nil {
		return res, fmt.Errorf("SaslAuthenticate: %w", err)
	}
	_, body, err = rc.readFrame()
	res.waited = time.Since(sent)
	if held != nil {
		res.held, res.heldOK = held(res.local)
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return res, fmt.Errorf("SaslAuthenticate: no answer and the connection still open: %w", err)
		}
		return res, nil // closed without an answer
	}
	ar := au.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	ar.Version = 1
	if err := ar.ReadFrom(body); err != nil {
		return res, fmt.Errorf("SaslAuthenticate response: %w", err)
	}
	switch ar.ErrorCode {
	case 0:
		res.ok = true
		return res, nil
	case kerr.SaslAuthenticationFailed.Code:
		res.refused = true
	default:
		return res, fmt.Errorf("SaslAuthenticate: %w, want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(ar.ErrorCode))
	}
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := io.Copy(io.Discard, nc); err != nil || n != 0 {
		return res, fmt.Errorf("after SASL_AUTHENTICATION_FAILED: %d more bytes, %v; want the connection closed", n, err)
	}
	return res, nil
}

// loginsFrom runs n logins with pass from goroutines goroutines at once
// and returns what each saw.
func loginsFrom(addr, pass string, n, goroutines int, held func(local string) ([2]int64, bool)) ([]loginResult, []error) {
	var (
		mu   sync.Mutex
		res  []loginResult
		errs []error
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range goroutines {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				r, err := plainLogin(addr, "alice", pass, held)
				mu.Lock()
				res = append(res, r)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return res, errs
}

// TestFailedLoginsFromOneAddress: 1,000 wrong passwords for alice from
// 127.0.0.1, 50 connections at a time, with SCRAM credentials of 4096
// iterations (each PLAIN check one PBKDF2, made 5 ms slower so that
// checks would overlap unbounded) and
// connection.failed.authentication.delay.ms 2. Asserted:
//   - no more than sasl.max.inflight.logins.per.ip (4) password checks
//     ever ran at once (counted by a wrapper around the Authenticator),
//     and no more than one per login (1,000 at most: no amplification);
//   - every login was answered SASL_AUTHENTICATION_FAILED (or closed) and
//     its connection closed; all 1,000 counted as failed logins and as
//     sasl_authentication_failed closes;
//   - the address's failure count grew with every failure (the counts
//     the server held the logins against are exactly 1 to 1,000: all
//     fall in the minute the count covers, the test takes seconds), each
//     answer's delay was 2 ms times min(count, 50), and the client waited
//     at least that long for its answer (a lower bound, which a timer
//     cannot break; no upper bound is asserted).
func TestFailedLoginsFromOneAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 logins: not in -short")
	}
	const (
		logins   = 1000
		parallel = 50
		delayMs  = 2
	)
	auth := &countingAuth{Authenticator: aliceAuth(t, []string{sasl.Plain}), hold: 5 * time.Millisecond}
	var (
		mu      sync.Mutex
		delayed = map[string][2]int64{} // remote: failures, delay (ns)
	)
	ts := startServer(t, authzLog(t), func(c *Config) {
		c.SASLEnabledMechanisms = []string{sasl.Plain}
		c.ConnectionFailedAuthenticationDelayMs = delayMs
		c.MaxConnections = 2 * parallel
	}, WithSASL(auth), withFailureDelayed(func(remote string, n int, d time.Duration) {
		mu.Lock()
		delayed[remote] = [2]int64{int64(n), int64(d)}
		mu.Unlock()
	}))
	if ts.srv.cfg.SASLMaxInflightLoginsPerIP != 4 {
		t.Fatalf("sasl.max.inflight.logins.per.ip defaults to %d, this test assumes 4", ts.srv.cfg.SASLMaxInflightLoginsPerIP)
	}

	res, errs := loginsFrom(ts.addr, "Zq9-not-hers", logins, parallel, func(local string) ([2]int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		e, ok := delayed[local]
		return e, ok
	})
	for _, err := range errs[:min(len(errs), 5)] {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.Fatalf("%d of %d logins went wrong", len(errs), logins)
	}

	if most := auth.most.Load(); most > 4 || most < 1 {
		t.Errorf("%d password checks ran at once; want 1 to sasl.max.inflight.logins.per.ip (4)", most)
	}
	if steps := auth.steps.Load(); steps > logins {
		t.Errorf("%d password checks for %d logins", steps, logins)
	}
	refused := 0
	seen := make([]bool, logins+1)
	for _, r := range res {
		if r.ok {
			t.Fatalf("a wrong password logged in (%s)", r.local)
		}
		if r.refused {
			refused++
		}
		n, d := int(r.held[0]), time.Duration(r.held[1])
		switch {
		case !r.heldOK:
			t.Fatalf("the failed login of %s was not held against its address", r.local)
		case n < 1 || n > logins || seen[n]:
			t.Fatalf("%s: failure count %d (again, or outside 1 to %d): the count did not grow with every failure", r.local, n, logins)
		case d != delayMs*time.Millisecond*time.Duration(min(n, 50)):
			t.Fatalf("%s: failure %d delayed %v, want %d ms times min(%d, 50)", r.local, n, d, delayMs, n)
		case r.waited < d:
			t.Fatalf("%s: failure %d answered after %v, before its delay of %v", r.local, n, r.waited, d)
		}
		seen[n] = true
	}
	if v := testutil.ToFloat64(ts.srv.m.logins.WithLabelValues(sasl.Plain, "failed")); v != logins {
		t.Errorf("failed logins counted %v, want %d", v, logins)
	}
	waitFor(t, "every failed login's connection closed", func() bool { return ts.closed(reasonSASLFailed) == logins })
	t.Logf("%d logins: %d answered SASL_AUTHENTICATION_FAILED, %d closed; %d password checks, at most %d at once",
		logins, refused, logins-refused, auth.steps.Load(), auth.most.Load())
}

// TestFailureCountsBounded: the failed-login counter holds at most
// 10,001 client addresses (memory bounded whatever the number of
// addresses), forgets all of them on the next new one, and an address's
// count then starts over from 1.
func TestFailureCountsBounded(t *testing.T) {
	var f failureCounts
	now := time.Now()
	if n := f.add("10.0.0.1", now); n != 1 {
		t.Fatalf("first failure counted %d", n)
	}
	if n := f.add("10.0.0.1", now); n != 2 {
		t.Fatalf("second failure counted %d", n)
	}
	for i := 1; i <= 10000; i++ { // 10,000 more addresses: 10,001 held
		f.add(fmt.Sprintf("fd00::%x", i), now)
		if len(f.m) > 10001 {
			t.Fatalf("%d addresses held after %d added", len(f.m), i+1)
		}
	}
	if len(f.m) != 10001 {
		t.Fatalf("%d addresses held, want 10,001", len(f.m))
	}
	if n := f.add("10.0.0.1", now); n != 1 {
		t.Fatalf("past 10,000 addresses a known one counted %d, want 1 (counting starts over)", n)
	}
	if len(f.m) != 1 {
		t.Fatalf("%d addresses held after the reset, want 1", len(f.m))
	}
	if n := f.add("10.0.0.1", now.Add(time.Minute+time.Second)); n != 1 {
		t.Fatalf("a failure past the minute counted %d, want 1", n)
	}
	for i := 0; i < 25000; i++ {
		f.add(fmt.Sprintf("fd01::%x", i), now)
		if len(f.m) > 10001 {
			t.Fatalf("%d addresses held", len(f.m))
		}
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFailedLogins reports the CPU (client and server, this
// process) that 1,000 failed PLAIN logins from one address cost, 50 at a
// time, as a ratio to 1,000 successful ones, 4 at a time (below
// sasl.max.inflight.logins.per.ip), measured in the same run: above 1
// would mean a failure costs more than a success (say, a check run
// twice). The failure delay is 1 ms a failure.
func BenchmarkFailedLogins(b *testing.B) {
	auth := aliceAuth(b, []string{sasl.Plain})
	ts := startServer(b, authzLog(b), func(c *Config) {
		c.SASLEnabledMechanisms, c.ConnectionFailedAuthenticationDelayMs = []string{sasl.Plain}, 1
	}, WithSASL(auth))
	var ok, failed time.Duration
	for b.Loop() {
		for _, run := range []struct {
			pass     string
			parallel int
			cpu      *time.Duration
		}{{"alice-pw", 4, &ok}, {"Zq9-not-hers", 50, &failed}} {
			start := cpuTime(b)
			res, errs := loginsFrom(ts.addr, run.pass, 1000, run.parallel, nil)
			*run.cpu += cpuTime(b) - start
			if len(errs) > 0 {
				b.Fatal(errs[0])
			}
			for _, r := range res {
				if r.ok != (run.pass == "alice-pw") {
					b.Fatalf("%s: logged in %v", run.pass, r.ok)
				}
			}
		}
	}
	b.ReportMetric(ok.Seconds()/float64(b.N), "cpu-s/1000-ok")
	b.ReportMetric(failed.Seconds()/float64(b.N), "cpu-s/1000-failed")
	b.ReportMetric(failed.Seconds()/ok.Seconds(), "failed/ok")
}
