package rsmtest

import (
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Fault is what the proxy does to one request.
type Fault int

// Faults.
const (
	Pass     Fault = iota // forward unchanged
	SlowDown              // 503 SlowDown, as S3 throttles
	Internal              // 500 InternalError
	Reset                 // close the connection without answering
	Stall                 // never answer (until the client gives up)
	Truncate              // forward, but cut the response body in half
	// InternalAfterBody is a 500 InternalError sent once the whole
	// request body is read: a store failing a request it has received.
	// Clients that retry by seeking the body they gave the HTTP transport
	// (minio-go) race with the transport still sending it after an early
	// answer such as Internal's; this one leaves them nothing to race.
	InternalAfterBody
	// StallBody forwards the headers and the first half of the response
	// body, then sends nothing more until the client goes away (or 10 s
	// pass): a store that stops mid-transfer.
	StallBody
	faultKinds
)

func (f Fault) String() string {
	return [...]string{"pass", "503", "500", "reset", "stall", "truncate", "500 after body", "stall mid-body"}[f]
}

// FaultProxy is an HTTP proxy in front of an S3 endpoint that injects
// faults, for tests, and can record the requests it sees (RecordRequests).
// The Host header is kept, so SigV4 signatures made for the proxy's address
// verify at the server.
type FaultProxy struct {
	Endpoint string // host:port of the proxy
	URL      string // http:// or https:// and Endpoint
	srv      *http.Server
	rp       *httputil.ReverseProxy

	mu        sync.Mutex
	rule      func(*http.Request) Fault
	rate      float64
	kinds     []Fault
	rng       *rand.Rand
	counts    [faultKinds]int
	recording bool
	recorded  []Request
}

// StartFaultProxy proxies plain HTTP to target (host:port) until the test
// ends.
func StartFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	return startFaultProxy(t, target, nil)
}

// StartFaultProxyTLS proxies HTTPS (HTTP/1.1, as S3 stores speak it) to
// an HTTPS target (host:port) until the test ends. The proxy presents cert
// to its clients and trusts only cert in the target: the pair made for a
// MinIO from StartMinIOTLS.
func StartFaultProxyTLS(t testing.TB, target string, cert *TestCert) *FaultProxy {
	t.Helper()
	return startFaultProxy(t, target, cert)
}

func startFaultProxy(t testing.TB, target string, cert *TestCert) *FaultProxy {
	scheme := "http"
	if cert != nil {
		scheme = "https"
	}
	u, _ := url.Parse(scheme + "://" + target)
	p := &FaultProxy{rp: httputil.NewSingleHostReverseProxy(u), rng: rand.New(rand.NewPCG(1, 2))}
	p.rp.ErrorLog = nil
	var lis net.Listener
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Endpoint = lis.Addr().String()
	p.URL = scheme + "://" + p.Endpoint
	if cert != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: cert.Pool, MinVersion: tls.VersionTLS12}
		p.rp.Transport = tr
		lis = tls.NewListener(lis, &tls.Config{
			Certificates: []tls.Certificate{cert.Cert}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
		})
	}
	p.srv = &http.Server{Handler: p}
	go p.srv.Serve(lis)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// SetRule makes rule decide each request's fault (nil: none).
func (p *FaultProxy) SetRule(rule func(*http.Request) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = rule
}

// SetRandom injects one of kinds into a fraction rate of requests.
func (p *FaultProxy) SetRandom(rate float64, seed uint64, kinds ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate, p.kinds, p.rng = rate, kinds, rand.New(rand.NewPCG(seed, seed+1))
}

// Counts returns how many requests got each fault.
func (p *FaultProxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for f, n := range p.counts {
		out[Fault(f).String()] = n
	}
	return out
}

func (p *FaultProxy) pick(r *http.Request) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := Pass
	if p.rule != nil {
		f = p.rule(r)
	}
	if f == Pass && p.rate > 0 && p.rng.Float64() < p.rate {
		f = p.kinds[p.rng.IntN(len(p.kinds))]
	}
	p.counts[f]++
	return f
}

// ServeHTTP implements http.Handler.
func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.record(r)
	switch p.pick(r) {
	case SlowDown:
		s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case Internal:
		s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case Reset:
		panic(http.ErrAbortHandler)
	case Stall:
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		panic(http.ErrAbortHandler)
	case Truncate:
		p.rp.ServeHTTP(&truncating{ResponseWriter: w}, r)
	case StallBody:
		p.rp.ServeHTTP(&truncating{ResponseWriter: w, stall: r.Context().Done()}, r)
	case InternalAfterBody:
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			panic(http.ErrAbortHandler)
		}
		s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	default:
		p.rp.ServeHTTP(w, r)
	}
}

func s3Error(w http.ResponseWriter, code int, s3code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(code)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>fault</RequestId></Error>`, s3code, msg)
}

// truncating forwards half of a response body, then drops the connection;
// with stall, it first waits for stall to close (or 10 s).
type truncating struct {
	http.ResponseWriter
	limit, n int64
	stall    <-chan struct{}
}

func (t *truncating) WriteHeader(code int) {
	var cl int64
	fmt.Sscan(t.Header().Get("Content-Length"), &cl)
	t.limit = cl / 2
	t.ResponseWriter.WriteHeader(code)
}

func (t *truncating) Write(b []byte) (int, error) {
	if t.limit > 0 && t.n+int64(len(b)) > t.limit {
		t.ResponseWriter.Write(b[:t.limit-t.n])
		if f, ok := t.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		if t.stall != nil {
			select {
			case <-t.stall:
			case <-time.After(10 * time.Second):
			}
		}
		panic(http.ErrAbortHandler)
	}
	t.n += int64(len(b))
	return t.ResponseWriter.Write(b)
}
