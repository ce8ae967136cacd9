package main

import (
	"net/http"
	"net/http/pprof"
	"runtime"
)

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
