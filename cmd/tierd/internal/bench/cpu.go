package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat
// (sysconf(_SC_CLK_TCK), 100 on every Linux architecture Go supports).
const clockTicks = 100

// cpuSeconds returns the user + system CPU time of process pid so far,
// seconds, from /proc/<pid>/stat (fields 14 and 15, counted after the
// command name's closing parenthesis, which may hold spaces). It returns
// -1 when the file cannot be read or parsed (the process is gone, or not
// on this machine).
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 { // state is f[0]; utime f[11], stime f[12]
		return -1
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return (u + s) / clockTicks
}

// cpuSample is the CPU seconds used so far by the bench process (the
// clients and the in-process servers) and by the store's process (-1
// when the store is not a child of the bench, e.g. --s3-endpoint).
type cpuSample struct{ proc, store float64 }

func (a cpuSample) sub(b cpuSample) cpuSample {
	d := cpuSample{proc: a.proc - b.proc, store: -1}
	if a.store >= 0 && b.store >= 0 {
		d.store = a.store - b.store
	}
	return d
}

// perGiB formats the sample as CPU-s per GiB of bytes moved,
// "proc+store" ("?" for an unknown store).
func (a cpuSample) perGiB(bytes int64) string {
	gib := float64(bytes) / (1 << 30)
	if a.store < 0 {
		return fmt.Sprintf("%.2f+?", a.proc/gib)
	}
	return fmt.Sprintf("%.2f+%.2f", a.proc/gib, a.store/gib)
}

// selfCPUSeconds is this process's user + system CPU time so far,
// seconds, from getrusage (microseconds, where /proc counts 10 ms ticks).
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuSeconds(os.Getpid())
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// cpu samples the bench process's and the store's CPU seconds.
func (e *env) cpu() cpuSample {
	c := cpuSample{proc: selfCPUSeconds(), store: -1}
	if e.minio != nil {
		c.store = cpuSeconds(e.minio.Pid())
	}
	return c
}

// addCPU adds CPU time spent moving bytes to r's CPU-per-GiB account.
func (r *Result) addCPU(c cpuSample, bytes int64) {
	r.cpuProc += c.proc
	if c.store < 0 || r.cpuStore < 0 {
		r.cpuStore = -1
	} else {
		r.cpuStore += c.store
	}
	r.cpuBytes += bytes
}

// profile starts a CPU profile of the bench process into
// <ProfileDir>/<name>.pprof when cfg.ProfileDir is set; stop ends it. A
// profile that cannot start (the directory is missing, another profile
// runs) is reported on the progress lines and skipped: profiles are an
// aid, not a result.
func (e *env) profile(name string) (stop func()) {
	if e.cfg.ProfileDir == "" {
		return func() {}
	}
	path := filepath.Join(e.cfg.ProfileDir, name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		e.logf("tierd bench: profile %s: %v", name, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		e.logf("tierd bench: profile %s: %v", name, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			e.logf("tierd bench: profile %s: %v", name, err)
		}
	}
}

// trace writes a Go execution trace of the bench process into
// <ProfileDir>/<name>.trace when cfg.ProfileDir is set; stop ends it. It
// shows where goroutines wait, which a CPU profile does not: `go tool
// trace -pprof=sync` (channels, mutexes), `-pprof=net`, `-pprof=syscall`
// and `-pprof=sched` (waiting for a thread) turn it into profiles of
// waiting time. Like profile, a trace that cannot start is reported and
// skipped.
func (e *env) trace(name string) (stop func()) {
	if e.cfg.ProfileDir == "" {
		return func() {}
	}
	path := filepath.Join(e.cfg.ProfileDir, name+".trace")
	f, err := os.Create(path)
	if err != nil {
		e.logf("tierd bench: trace %s: %v", name, err)
		return func() {}
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		e.logf("tierd bench: trace %s: %v", name, err)
		return func() {}
	}
	return func() {
		trace.Stop()
		if err := f.Close(); err != nil {
			e.logf("tierd bench: trace %s: %v", name, err)
		}
	}
}

// firstTouchProbe returns the CPU seconds this machine spends per GiB of
// memory a process touches for the first time (page faults: the kernel
// finds, zeroes and maps each 4 KiB page), from touching one page in
// every 4 KiB of a fresh 64 MiB anonymous mapping on a locked thread
// (RUSAGE_THREAD). A process pays it once for memory it keeps, and again
// for memory it gives back and takes anew (a garbage-collected heap does
// both). ok false when the probe could not run.
func firstTouchProbe() (cpuPerGiB float64, ok bool) {
	const size = 64 << 20
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0, false
	}
	defer syscall.Munmap(b)
	threadCPU := func() float64 {
		var ru syscall.Rusage
		_ = syscall.Getrusage(1, &ru) // RUSAGE_THREAD
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	c0 := threadCPU()
	for i := 0; i < size; i += 4096 {
		b[i] = 1
	}
	return (threadCPU() - c0) * float64(1<<30) / size, true
}
