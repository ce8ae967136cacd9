package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/daemon"
)

// TestServeHTTPPprof checks that /debug/pprof/ is served only with
// http.pprof on, and that the heap profile comes back from it.
func TestServeHTTPPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		addr := freeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- daemon.HTTP{Addr: addr, Registry: prometheus.NewRegistry(), Ready: func() (bool, string) { return true, "" }, Pprof: on,
				Log: slog.New(slog.DiscardHandler)}.Run(ctx)
		}()
		for deadline := time.Now().Add(10 * time.Second); !healthy(addr); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("http server did not start")
			}
		}
		for path, wantOn := range map[string]int{"/debug/pprof/": http.StatusOK, "/debug/pprof/heap?debug=1": http.StatusOK, "/debug/pprof/mutex?debug=1": http.StatusOK} {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusNotFound
			if on {
				want = wantOn
			}
			if resp.StatusCode != want {
				t.Errorf("pprof %v: GET %s = %d, want %d: %.200s", on, path, resp.StatusCode, want, body)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
