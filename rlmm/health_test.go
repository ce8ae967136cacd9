package rlmm

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/tmpfs"
)

// logBuf collects log lines, safe for Pebble's goroutines.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.buf.String()), "\n")
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// faultDirs runs a test on a faultFS over an in-memory FS and over a real
// directory.
func faultDirs(t *testing.T, fn func(t *testing.T, fs *faultFS, dir string)) {
	t.Run("mem", func(t *testing.T) { fn(t, newFaultFS(vfs.NewMem()), "db") })
	t.Run("disk", func(t *testing.T) { fn(t, newFaultFS(vfs.Default), filepath.Join(t.TempDir(), "db")) })
}

// openBounded opens the store, failing the test if Open has not returned
// after a minute (it used to wait for ever on a full disk).
func openBounded(t *testing.T, ctx context.Context, cfg Config, opts ...Option) (*Store, error) {
	t.Helper()
	type result struct {
		s   *Store
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := OpenContext(ctx, cfg, opts...)
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-time.After(time.Minute):
		t.Fatal("OpenContext did not return")
		return nil, nil
	}
}

// waitHealthy waits until the store takes writes again, failing the test
// if it has not after a minute.
func waitHealthy(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for s.Health() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still unhealthy: %v", s.Health())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A full metadata dir at start: Open returns at once with an error naming
// the dir, whether the probe or Pebble meets it, on a new or an existing
// store (whose WAL Pebble flushes while opening: the write that used to
// fail in a loop for ever).
func TestOpenFullDirFailsFast(t *testing.T) {
	cases := []struct {
		name     string
		existing bool
		free     int64 // bytes left when opening
		minFree  int64
	}{
		{"probe fails, new store", false, 100, 0},
		{"pebble fails, new store", false, 4096 + 100, 0},
		{"pebble fails, existing store", true, 4096 + 100, 0},
		{"below min_free_bytes", true, 1 << 20, 2 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			faultDirs(t, func(t *testing.T, fs *faultFS, dir string) {
				if tc.existing {
					s, err := Open(Config{Dir: dir}, WithFS(fs))
					if err != nil {
						t.Fatal(err)
					}
					for i := int64(0); i < 20; i++ {
						if err := s.AddSegment(seg(i*10, i*10+9)); err != nil {
							t.Fatal(err)
						}
					}
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
				}
				fs.free.Store(tc.free)
				var log logBuf
				s, err := openBounded(t, context.Background(), Config{Dir: dir, MinFreeBytes: tc.minFree}, WithFS(fs), WithLogger(log.logger()))
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded on a full dir")
				}
				var de *DirError
				if !errors.As(err, &de) || !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("err = %v, want a *DirError wrapping ErrUnavailable and ENOSPC", err)
				}
				if msg := err.Error(); !strings.Contains(msg, "metadata dir "+dir+" is full") || strings.Contains(msg, "\n") {
					t.Fatalf("err = %q, want one line naming the dir as full", msg)
				}
				if n := len(log.lines()); n > 5 {
					t.Fatalf("%d log lines while opening, want a few:\n%s", n, strings.Join(log.lines()[:10], "\n"))
				}
			})
		})
	}
}

func TestOpenReadOnlyDirFailsFast(t *testing.T) {
	faultDirs(t, func(t *testing.T, fs *faultFS, dir string) {
		fs.readOnly.Store(true)
		_, err := openBounded(t, context.Background(), Config{Dir: dir}, WithFS(fs))
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "metadata dir "+dir+" is read-only") {
			t.Fatalf("err = %v, want the dir named as read-only", err)
		}
	})
}

// Open returns when its context ends, even while Pebble waits on a disk
// that does not answer.
func TestOpenHonoursContext(t *testing.T) {
	fs := newFaultFS(vfs.NewMem())
	stall := make(chan struct{})
	defer close(stall)
	fs.stall.Store(&stall)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := openBounded(t, ctx, Config{Dir: "db"}, WithFS(fs))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// The disk fills (or turns read-only) while tierd runs: writes fail with the cause (no panic,
// no hang), reads go on, Health and the gauge say why, and once space
// returns the store takes writes again by itself, with every acknowledged
// row kept.
func TestFullWhileRunningRecovers(t *testing.T) {
	faults := []struct {
		name        string
		break_, fix func(*faultFS)
		errno       syscall.Errno
		says        string
	}{
		{"full", func(f *faultFS) { f.free.Store(0) }, func(f *faultFS) { f.free.Store(-1) }, syscall.ENOSPC, "is full"},
		{"read-only", func(f *faultFS) { f.readOnly.Store(true) }, func(f *faultFS) { f.readOnly.Store(false) }, syscall.EROFS, "is read-only"},
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) { testFaultWhileRunning(t, fault.break_, fault.fix, fault.errno, fault.says) })
	}
}

func testFaultWhileRunning(t *testing.T, break_, fix func(*faultFS), errno syscall.Errno, says string) {
	faultDirs(t, func(t *testing.T, fs *faultFS, dir string) {
		reg := prometheus.NewRegistry()
		var log logBuf
		s, err := Open(Config{Dir: dir}, WithFS(fs), WithRegisterer(reg), WithLogger(log.logger()))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.retryMin = time.Millisecond
		a, b := seg(0, 9), seg(10, 19)
		if err := s.AddSegment(a); err != nil {
			t.Fatal(err)
		}
		break_(fs)
		err = s.AddSegment(b)
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errno) || !strings.Contains(err.Error(), "metadata dir "+dir+" "+says) {
			t.Fatalf("AddSegment: %v, want %v", err, errno)
		}
		if h := s.Health(); !errors.Is(h, errno) {
			t.Fatalf("Health() = %v, want %v", h, errno)
		}
		if v := gaugeValue(t, reg, "tierd_rlmm_writable"); v != 0 {
			t.Fatalf("tierd_rlmm_writable = %v on a full disk", v)
		}
		// Reads go on; like any Pebble reader they may see the failed
		// write, which the retries may or may not keep (as after a crash).
		rows, err := s.Segments(tp)
		if err != nil || len(rows) < 1 || rows[0].ID != a.ID {
			t.Fatalf("reads while full: %v, %v", rows, err)
		}
		fix(fs)
		waitHealthy(t, s)
		if err := s.AddSegment(b); err != nil && !errors.Is(err, ErrSegmentExists) {
			t.Fatalf("AddSegment after space returned: %v", err)
		}
		rows, err = s.Segments(tp)
		if err != nil || len(rows) != 2 {
			t.Fatalf("rows after recovery: %v, %v", rows, err)
		}
		if v := gaugeValue(t, reg, "tierd_rlmm_writable"); v != 1 {
			t.Fatalf("tierd_rlmm_writable = %v after recovery", v)
		}
		if !strings.Contains(strings.Join(log.lines(), "\n"), "metadata store takes writes again") {
			t.Fatalf("no recovery line in the log:\n%s", strings.Join(log.lines(), "\n"))
		}
	})
}

// Below min_free_bytes the store refuses writes before Pebble meets a full
// disk, and takes them again as soon as space returns.
func TestLowSpaceRefusesWrites(t *testing.T) {
	fs := newFaultFS(vfs.NewMem())
	s, err := Open(Config{Dir: "db", MinFreeBytes: 1 << 20}, WithFS(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.spaceTTL = 0
	fs.free.Store(512 << 10)
	err = s.AddSegment(seg(0, 9))
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "524288 bytes free, below metadata.min_free_bytes (1048576)") {
		t.Fatalf("AddSegment below min_free_bytes: %v", err)
	}
	if s.Health() == nil {
		t.Fatal("Health() = nil below min_free_bytes")
	}
	fs.free.Store(-1)
	if err := s.AddSegment(seg(0, 9)); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{MinFreeBytes: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "dir is required") || !strings.Contains(err.Error(), "min_free_bytes") {
		t.Fatalf("Validate() = %v, want both problems", err)
	}
}

// gaugeValue returns the value of the registered gauge name.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// On a real tmpfs: a full one at start, a read-only one at start,
// and one filling while the store runs, then given space back.
func TestTmpfs(t *testing.T) {
	t.Run("full at start", func(t *testing.T) {
		mnt := tmpfs.Mount(t, "1m")
		tmpfs.Fill(t, mnt)
		dir := filepath.Join(mnt, "db")
		_, err := openBounded(t, context.Background(), Config{Dir: dir}, WithLogger(slog.New(slog.DiscardHandler)))
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "metadata dir "+dir+" is full") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("read-only at start", func(t *testing.T) {
		mnt := tmpfs.Mount(t, "1m")
		tmpfs.ReadOnly(t, mnt, true)
		dir := filepath.Join(mnt, "db")
		_, err := openBounded(t, context.Background(), Config{Dir: dir})
		if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "metadata dir "+dir+" is read-only") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("fills while running", func(t *testing.T) {
		mnt := tmpfs.Mount(t, "16m") // Pebble preallocates its WAL: a few MiB

		s, err := Open(Config{Dir: filepath.Join(mnt, "db")})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.retryMin = time.Millisecond
		var acked []remotelog.SegmentMetadata
		for i := int64(0); i < 5; i++ {
			m := seg(i*10, i*10+9)
			if err := s.AddSegment(m); err != nil {
				t.Fatal(err)
			}
			acked = append(acked, m)
		}
		filler := tmpfs.Fill(t, mnt)
		for i := int64(5); err == nil && i < 100000; i++ {
			m := seg(i*10, i*10+9)
			if err = s.AddSegment(m); err == nil {
				acked = append(acked, m)
			}
		}
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("writes on a full tmpfs: %v", err)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		waitHealthy(t, s)
		if err := s.AddSegment(seg(1<<40, 1<<40+9)); err != nil {
			t.Fatalf("write after space returned: %v", err)
		}
		rows, err := s.Segments(tp)
		if err != nil {
			t.Fatal(err)
		}
		have := map[remotelog.SegmentID]bool{}
		for _, r := range rows {
			have[r.ID] = true
		}
		for _, m := range acked {
			if !have[m.ID] {
				t.Fatalf("acknowledged row %d-%d lost", m.StartOffset, m.EndOffset)
			}
		}
		t.Logf("%d rows acknowledged before the disk was full", len(acked))
	})
}

// Writers keep writing while the disk fills and empties three times: no
// write hangs or panics, the store recovers each time, and every
// acknowledged row survives.
func TestWritersThroughRepeatedOutages(t *testing.T) {
	faultDirs(t, func(t *testing.T, fs *faultFS, dir string) {
		s, err := Open(Config{Dir: dir}, WithFS(fs))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.retryMin = time.Millisecond
		var (
			mu    sync.Mutex
			acked []remotelog.SegmentMetadata
			stop  = make(chan struct{})
			wg    sync.WaitGroup
		)
		for w := int64(0); w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int64(0); ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					m := seg((w<<32)+i*10, (w<<32)+i*10+9)
					if err := s.AddSegment(m); err == nil {
						mu.Lock()
						acked = append(acked, m)
						mu.Unlock()
					} else if !errors.Is(err, ErrUnavailable) {
						t.Errorf("write: %v", err)
						return
					} else {
						time.Sleep(time.Millisecond)
					}
				}
			}()
		}
		for round := 0; round < 3; round++ {
			fs.free.Store(0)
			deadline := time.Now().Add(time.Minute)
			for s.Health() == nil {
				if time.Now().After(deadline) {
					t.Fatal("the full disk was never noticed")
				}
				time.Sleep(time.Millisecond)
			}
			fs.free.Store(-1)
			waitHealthy(t, s)
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			waitFor(t, "writes after recovery", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(acked) >= n+40
			})
		}
		close(stop)
		wg.Wait()
		rows, err := s.Segments(tp)
		if err != nil {
			t.Fatal(err)
		}
		have := map[remotelog.SegmentID]bool{}
		for _, r := range rows {
			have[r.ID] = true
		}
		for _, m := range acked {
			if !have[m.ID] {
				t.Fatalf("acknowledged row %d-%d lost", m.StartOffset, m.EndOffset)
			}
		}
		t.Logf("%d rows acknowledged", len(acked))
	})
}

// waitFor polls cond, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
