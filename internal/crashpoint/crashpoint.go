// Package crashpoint lets crash tests kill tierd at a named step. When the
// environment variable TIERD_CRASHPOINT is "name" or "name:N", the Nth call
// of Hit("name") (the first when N is absent) kills the process with
// SIGKILL, as a power cut or an OOM kill would. Otherwise Hit costs one
// atomic load.
package crashpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// EnvVar names the crash point.
const EnvVar = "TIERD_CRASHPOINT"

var (
	once  sync.Once
	point string
	nth   int64
	hits  atomic.Int64
	armed atomic.Bool
)

func load() {
	v := os.Getenv(EnvVar)
	if v == "" {
		return
	}
	point, nth = v, 1
	if i := strings.LastIndexByte(v, ':'); i > 0 {
		if n, err := strconv.ParseInt(v[i+1:], 10, 64); err == nil && n > 0 {
			point, nth = v[:i], n
		}
	}
	armed.Store(true)
}

// Hit marks that the process reached the named step.
func Hit(name string) {
	once.Do(load)
	if !armed.Load() || name != point {
		return
	}
	if hits.Add(1) == nth {
		p, err := os.FindProcess(os.Getpid())
		if err == nil {
			p.Kill()
		}
		select {} // wait for the signal
	}
}
