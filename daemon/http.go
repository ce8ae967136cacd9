package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTP is a running tierd's HTTP endpoint (http.listen): /metrics,
// /-/healthy, /-/ready, the status page at "/" and, when asked for, Go's
// profiles under /debug/pprof/.
type HTTP struct {
	// Addr is the host:port to listen on.
	Addr string
	// Registry is what /metrics serves.
	Registry *prometheus.Registry
	// Ready answers /-/ready: 200 "ok", or 503 with why not.
	Ready func() (bool, string)
	// Page is the status page at "/"; nil: none.
	Page http.Handler
	// Pprof serves Go's profiles (http.pprof; see handlePprof).
	Pprof bool
	// TLS, when not nil, is the server's TLS config; nil: plaintext.
	TLS *tls.Config
	// Guard, when not nil, wraps all but /-/healthy and /-/ready (probes
	// stay open; they say only ok or why not ready): http.tokens_file.
	Guard func(http.Handler) http.Handler
	// Log gets the server's own errors (refused TLS handshakes among
	// them) at debug level. Required.
	Log *slog.Logger
}

// Run serves until ctx ends, then shuts the server down (giving open
// requests 5s) and returns nil. Errors: the listen's ("http: listen:
// ..."), or the server's.
func (h HTTP) Run(ctx context.Context) error {
	mux := http.NewServeMux()
	guarded := http.NewServeMux() // what guard protects: the page, /metrics, the profiles
	if h.Pprof {
		handlePprof(guarded)
	}
	if h.Page != nil {
		guarded.Handle("/{$}", h.Page)
	}
	guarded.Handle("/metrics", promhttp.HandlerFor(h.Registry, promhttp.HandlerOpts{Registry: h.Registry}))
	var handler http.Handler = guarded
	if h.Guard != nil {
		handler = h.Guard(handler)
	}
	mux.Handle("/", handler)
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := h.Ready(); !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	lis, err := net.Listen("tcp", h.Addr)
	if err != nil {
		return fmt.Errorf("http: listen: %w", err)
	}
	if h.TLS != nil {
		lis = tls.NewListener(lis, h.TLS)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(h.Log.With("component", "http").Handler(), slog.LevelDebug)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Sampling of the block and mutex profiles while http.pprof is on: one
// blocking event per blockProfileRateNs nanoseconds blocked, on average,
// and one contended mutex unlock in mutexProfileFraction.
const (
	blockProfileRateNs   = 10_000
	mutexProfileFraction = 10
)

// handlePprof adds Go's runtime profiles under /debug/pprof/ to mux
// (http.pprof: profile?seconds=N for CPU, heap, allocs, goroutine, block,
// mutex, trace) and turns on block and mutex profiling, which are off in
// a Go program until asked for. The handlers are registered on mux, not
// on http.DefaultServeMux, so nothing is served unless the setting is on.
func handlePprof(mux *http.ServeMux) {
	runtime.SetBlockProfileRate(blockProfileRateNs)
	runtime.SetMutexProfileFraction(mutexProfileFraction)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
