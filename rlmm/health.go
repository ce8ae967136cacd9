package rlmm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrUnavailable marks the errors of a store that cannot take writes: its
// directory is full, read-only or failing (see DirError). Reads go on.
var ErrUnavailable = errors.New("rlmm: metadata store unavailable")

// DirError is a metadata dir that cannot take writes. It wraps
// ErrUnavailable and the cause, so errors.Is finds both (syscall.ENOSPC
// for a full dir, syscall.EROFS for a read-only one).
type DirError struct {
	Dir string
	Err error
}

func (e *DirError) Error() string {
	switch {
	case errors.Is(e.Err, syscall.ENOSPC), errors.Is(e.Err, syscall.EDQUOT):
		return fmt.Sprintf("metadata dir %s is full: %v; free space on its filesystem or set metadata.dir to another", e.Dir, e.Err)
	case errors.Is(e.Err, syscall.EROFS):
		return fmt.Sprintf("metadata dir %s is read-only: %v; mount its filesystem read-write or set metadata.dir to another", e.Dir, e.Err)
	case errors.Is(e.Err, syscall.EACCES), errors.Is(e.Err, syscall.EPERM):
		return fmt.Sprintf("metadata dir %s is not writable by uid %d: %v; let that user write it or set metadata.dir to another", e.Dir, os.Getuid(), e.Err)
	}
	return fmt.Sprintf("metadata dir %s failed: %v", e.Dir, e.Err)
}

func (e *DirError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// lowSpaceError is free space below Config.MinFreeBytes. It wraps
// syscall.ENOSPC.
type lowSpaceError struct{ free, min int64 }

func (e *lowSpaceError) Error() string {
	return fmt.Sprintf("%d bytes free, below metadata.min_free_bytes (%d)", e.free, e.min)
}

func (e *lowSpaceError) Unwrap() error { return syscall.ENOSPC }

// Retry pacing of a store whose directory stopped taking writes. The
// backoff grows across consecutive outages too: it starts again from
// retryMin only once the instance a retry opened has taken writes for
// stableFor.
const (
	retryMin  = 250 * time.Millisecond
	retryMax  = 10 * time.Second
	stableFor = 3 * retryMax
)

// probeReserve is the space, bytes, the write probe reserves
// (fallocate): more than Pebble preallocates for a WAL (110 % of the 2 MiB
// memtable), so that a directory the probe finds writable can take the
// WAL's next write; a 4 KiB probe let a nearly full dir pass, reopen,
// and fail the next write, over and over.
const probeReserve = 4 << 20

// checkDir tells whether the directory takes writes now: it is created if
// missing, a probe file is written, synced and removed, and the free space
// is at least MinFreeBytes. Errors: *DirError.
func (s *Store) checkDir() error {
	dir := s.cfg.Dir
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return &DirError{Dir: dir, Err: err}
	}
	// A name of this process's own (tierd segments may probe the dir of a
	// running tierd), the same at every retry so that their errors read
	// the same and are logged once.
	probe := s.fs.PathJoin(dir, fmt.Sprintf(".tierd-write-probe-%d", os.Getpid()))
	f, err := s.fs.Create(probe, vfs.WriteCategoryUnspecified)
	if err == nil {
		_, err = f.Write(make([]byte, 4096))
		if err == nil {
			err = f.Preallocate(0, probeReserve)
		}
		if err == nil {
			err = f.Sync()
		}
		err = errors.Join(err, f.Close())
		err = errors.Join(err, s.fs.Remove(probe))
	}
	if err != nil {
		return &DirError{Dir: dir, Err: err}
	}
	return s.lowSpace()
}

// lowSpace returns a *DirError when the directory's filesystem has less
// than MinFreeBytes free, nil when it has enough or cannot tell (an FS
// without disk usage).
func (s *Store) lowSpace() error {
	if s.cfg.MinFreeBytes <= 0 {
		return nil
	}
	if u, err := s.fs.GetDiskUsage(s.existingDir()); err == nil && u.AvailBytes < uint64(s.cfg.MinFreeBytes) {
		return &DirError{Dir: s.cfg.Dir, Err: &lowSpaceError{free: int64(u.AvailBytes), min: s.cfg.MinFreeBytes}}
	}
	return nil
}

// withContext runs fn, returning early with ctx's error (wrapped) when ctx
// ends first; fn then goes on, its result dropped (a write to a hung disk
// cannot be interrupted).
func withContext(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("rlmm: interrupted: %w", ctx.Err())
	}
}

// spaceError is lowSpace for a running store: checked at most once per
// spaceTTL, and a change is logged.
func (s *Store) spaceError() error {
	if s.cfg.MinFreeBytes <= 0 {
		return nil
	}
	s.spaceMu.Lock()
	defer s.spaceMu.Unlock()
	if !s.spaceAt.IsZero() && time.Since(s.spaceAt) < s.spaceTTL {
		return s.spaceErr
	}
	s.spaceAt = time.Now()
	err := s.lowSpace()
	switch {
	case err != nil && s.spaceErr == nil:
		s.log.Error("metadata store refuses writes until space returns; reads go on", "err", err)
	case err == nil && s.spaceErr != nil:
		s.log.Info("metadata store takes writes again: space returned", "dir", s.cfg.Dir)
	}
	s.spaceErr = err
	return err
}

// existingDir is the directory, or its nearest ancestor that exists.
func (s *Store) existingDir() string {
	d := s.cfg.Dir
	for {
		if _, err := s.fs.Stat(d); err == nil || filepath.Dir(d) == d {
			return d
		}
		d = filepath.Dir(d)
	}
}

// Health returns nil when the store takes writes, else why not: a
// *DirError (wrapping ErrUnavailable and the cause) naming the directory
// and what to do. While it is not nil, writes fail with it, reads are
// served, and the store retries with backoff, taking writes again by
// itself once the directory does; except a directory removed or
// replaced while the store ran (errDirGone), which only a restart mends.
func (s *Store) Health() error {
	in := s.inst.Load()
	if in.isDead() {
		s.recMu.Lock()
		err := s.recErr
		s.recMu.Unlock()
		if err != nil {
			return err
		}
		return &DirError{Dir: s.cfg.Dir, Err: in.cause}
	}
	return s.spaceError()
}

// openInstance opens Pebble on the directory, through a guardFS. It
// returns when Open does, when a write of the instance fails (Open would
// then wait for ever), or when ctx ends. Errors: *DirError, Pebble's
// (wrapped), ctx's (wrapped).
func (s *Store) openInstance(ctx context.Context) (*instance, error) {
	in := newInstance()
	in.onFail = s.onFail
	type result struct {
		db  *pebble.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Metadata rows are small and few: a small memtable and block
		// cache keep the store's memory (allocated outside the Go heap)
		// to a few MiB.
		cache := pebble.NewCache(2 << 20)
		defer cache.Unref()
		db, err := pebble.Open(s.cfg.Dir, &pebble.Options{FS: &guardFS{inner: s.fs, in: in}, Logger: pebbleLogger{l: s.log, in: in},
			Cache: cache, MemTableSize: 2 << 20})
		done <- result{db, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("rlmm: open %s: %w", s.cfg.Dir, r.err)
		}
		in.db = r.db
		return in, nil
	case <-in.dead:
		go func() { // a write under way may take its time
			if s.abandon(in) {
				in.unpark() // Open returns now, its writes failing
				in.db = (<-done).db
				s.retire(in)
			}
		}()
		return nil, &DirError{Dir: s.cfg.Dir, Err: in.cause}
	case <-ctx.Done():
		go func() {
			if r := <-done; r.db != nil {
				r.db.Close()
			}
		}()
		return nil, fmt.Errorf("rlmm: open %s: %w", s.cfg.Dir, ctx.Err())
	}
}

// abandon gives up a dead instance: once none of its writes is under way
// (they all park), it releases the directory lock the instance took, so
// that a new instance can open the directory, and reports true. It
// returns false when the store closes first. It does not close the
// instance: retire does, once no other instance replaces it.
func (s *Store) abandon(in *instance) bool {
	for !in.quiet() {
		select {
		case <-s.closing:
			return false // keep the lock: a write may still land
		case <-time.After(10 * time.Millisecond):
		}
	}
	if l := in.lock.Load(); l != nil {
		l.Close()
	}
	return true
}

// install makes in the instance in use. One that died meanwhile starts
// the retries at once.
func (s *Store) install(in *instance) {
	s.inst.Store(in)
	if in.isDead() {
		s.onFail(in)
	}
}

// onFail is told when an instance dies. For the one in use it logs the
// cause and starts the retries, once.
func (s *Store) onFail(in *instance) {
	if s.inst.Load() != in {
		return // an instance being opened: openInstance reports it
	}
	in.retrying.Do(func() {
		s.failures.Inc()
		s.recMu.Lock()
		defer s.recMu.Unlock()
		if s.closed {
			return
		}
		// An outage soon after the last recovery continues its backoff.
		wait := s.retryMin
		if !s.recoveredAt.IsZero() && time.Since(s.recoveredAt) < stableFor {
			wait = min(2*max(s.lastWait, s.retryMin), retryMax)
		}
		s.lastWait = wait
		s.log.Error("metadata store stopped taking writes; reads go on; retrying with backoff", "err", &DirError{Dir: s.cfg.Dir, Err: in.cause},
			"retry_in", wait)
		s.recErr = nil
		s.wg.Add(1)
		go s.recoverLoop(in, wait)
	})
}

// recoverLoop waits, with backoff from retryMin to retryMax, until the
// directory takes writes again, then opens a new instance in place of the
// dead one.
func (s *Store) recoverLoop(dead *instance, wait time.Duration) {
	defer s.wg.Done()
	since := time.Now()
	last := ""
	for {
		t := time.NewTimer(wait)
		select {
		case <-s.closing:
			t.Stop()
			return
		case <-t.C:
		}
		s.recMu.Lock()
		s.lastWait = wait
		s.recMu.Unlock()
		wait = min(2*wait, retryMax)
		err := s.dirGone() // never made again: checkDir would
		if err != nil {
			err = &DirError{Dir: s.cfg.Dir, Err: err}
		} else {
			err = s.checkDir()
		}
		var in *instance
		if err == nil {
			s.abandon(dead)
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-s.closing:
				case <-ctx.Done():
				}
				cancel()
			}()
			in, err = s.openInstance(ctx)
			cancel()
		}
		if err != nil {
			s.recMu.Lock()
			s.recErr = err
			s.recMu.Unlock()
			if msg := err.Error(); msg != last {
				s.log.Warn("metadata dir still not writable; retrying", "err", err, "retry_in", wait)
				last = msg
			}
			continue
		}
		s.recMu.Lock()
		s.recErr, s.recoveredAt = nil, time.Now()
		s.recMu.Unlock()
		s.log.Info("metadata store takes writes again", "dir", s.cfg.Dir, "after", time.Since(since).Round(time.Millisecond))
		s.mu.Lock()
		s.install(in)
		s.gen.Add(1)
		// A write whose outcome its caller never learnt may be in the
		// new instance (as after a crash): number journal entries after
		// it.
		if seq, err := s.lastJournalSeq(); err == nil {
			s.journalSeq = seq
		}
		s.mu.Unlock()
		s.retire(dead) // its goroutines and memory, released
		return
	}
}

// commit writes a batch durably and invalidates cached snapshots (it
// changes the Generation); see apply.
func (s *Store) commit(b *pebble.Batch) error {
	defer s.gen.Add(1)
	return s.apply(b)
}

// apply writes a batch durably. The batch is copied into one of the
// current instance and committed by a goroutine of its own, so that a
// write the instance parks returns here as the instance's *DirError
// instead of hanging the caller. It leaves the Generation as it is: for
// writes no cached read depends on (the broker-copy catalogue).
func (s *Store) apply(b *pebble.Batch) error {
	in := s.inst.Load()
	if in.isDead() {
		return s.Health()
	}
	if err := s.spaceError(); err != nil {
		return err
	}
	nb := in.db.NewBatch()
	if err := nb.Apply(b, nil); err != nil {
		nb.Close()
		return err
	}
	done := make(chan error, 1)
	go func() {
		err := nb.Commit(pebble.Sync)
		nb.Close()
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			// A synced write to a removed directory lands in an unlinked
			// WAL: not durable.
			if gone := s.dirGone(); gone != nil {
				in.fail(gone)
				return &DirError{Dir: s.cfg.Dir, Err: gone}
			}
		}
		return err
	case <-in.dead:
		return &DirError{Dir: s.cfg.Dir, Err: in.cause}
	}
}

// closeInstance closes the current instance, or abandons it when it is
// dead or dies while closing.
func (s *Store) closeInstance() error {
	in := s.inst.Load()
	if !in.isDead() {
		done := make(chan error, 1)
		go func() { done <- in.db.Close() }()
		select {
		case err := <-done:
			return err
		case <-in.dead:
		}
	}
	// Acknowledged writes are in the WAL; nothing else needs saving.
	if in.quiet() {
		if l := in.lock.Load(); l != nil {
			l.Close()
		}
		done := make(chan struct{})
		go func() { s.retire(in); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a read stuck on a hung disk: leave it
		}
	}
	return nil
}

// closing state of a Store.
type lifecycle struct {
	closing   chan struct{}
	closeOnce sync.Once
	recMu     sync.Mutex // guards closed, recErr and wg.Add
	closed    bool
	recErr    error // the last retry's failure
	// lastWait is the last backoff waited, recoveredAt when the last
	// retry succeeded (zero before any): they carry the backoff across
	// outages that follow each other (see stableFor).
	lastWait    time.Duration
	recoveredAt time.Time
	wg          sync.WaitGroup
}
