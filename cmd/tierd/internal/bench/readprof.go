package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"
)

// This file takes Go profiles of one readers_N run when Config.ProfileDir
// is set: the "tierd run" child's CPU profile (its http.pprof endpoint)
// and the bench process's own, over the same ProfileSeconds from the
// readers' start, then the child's block and mutex profiles (cumulative
// since it started, which was just before the run) and its /metrics.

// readProfile is the profiles of one run being taken.
type readProfile struct {
	dir, name, httpURL string
	wg                 sync.WaitGroup
	mu                 sync.Mutex
	errs               []error
}

// startReadProfile starts the profiles of the run named name ("" dir:
// none) and returns a function that waits for them, writes them to dir
// as <name>.{tierd,bench}.cpu.pprof, <name>.tierd.{block,mutex}.pprof,
// <name>.metrics.pprof (the child's /metrics, text), and returns the files' problems, joined into one error, nil when there
// were none. httpURL is the child's http.listen URL ("" for the
// in-process server, profiled with the bench process).
func startReadProfile(dir, name, httpURL string, seconds int) func() error {
	if dir == "" {
		return func() error { return nil }
	}
	p := &readProfile{dir: dir, name: name, httpURL: httpURL}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return func() error { return err }
	}
	if httpURL != "" {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.get(fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds), "tierd.cpu")
		}()
	}
	if f, err := os.Create(filepath.Join(dir, name+".bench.cpu.pprof")); err != nil {
		p.fail(err)
	} else if err := pprof.StartCPUProfile(f); err != nil { // another profile runs (go test -cpuprofile)
		f.Close()
		p.fail(fmt.Errorf("bench CPU profile: %w", err))
	} else {
		p.wg.Add(1)
		time.AfterFunc(time.Duration(seconds)*time.Second, func() {
			defer p.wg.Done()
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				p.fail(err)
			}
		})
	}
	return func() error {
		p.wg.Wait()
		if httpURL != "" {
			p.get("/debug/pprof/block", "tierd.block")
			p.get("/debug/pprof/mutex", "tierd.mutex")
			p.get("/metrics", "metrics")
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.errs) > 0 {
			return fmt.Errorf("profiles of %s: %v", name, p.errs)
		}
		return nil
	}
}

func (p *readProfile) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

// get writes the child's profile (or /metrics) at path to
// <name>.<kind>.pprof.
func (p *readProfile) get(path, kind string) {
	resp, err := http.Get(p.httpURL + path)
	if err != nil {
		p.fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		p.fail(fmt.Errorf("GET %s: %s", path, resp.Status))
		return
	}
	f, err := os.Create(filepath.Join(p.dir, p.name+"."+kind+".pprof"))
	if err != nil {
		p.fail(err)
		return
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		p.fail(err)
	}
	if err := f.Close(); err != nil {
		p.fail(err)
	}
}
