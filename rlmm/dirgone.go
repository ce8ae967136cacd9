package rlmm

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// errDirGone is the cause of a store whose directory was removed, or
// replaced by another, while it ran: Pebble's open files (its WAL among
// them) are then unlinked, and a write that lands there would be lost
// at the next start. The store takes no more writes and does not make
// the directory again (it would run on an empty store behind the
// process's back); a restart starts a new metadata dir, which tierd run
// treats as new (initial_retention_delay).
var errDirGone = errors.New("it was removed or replaced while tierd ran; restart tierd: it then starts a new metadata dir " +
	"(its rows are rebuilt from the bucket's manifests, and initial_retention_delay applies to it)")

// dirIdentity is what tells one directory from another at the same path:
// its device and inode where the filesystem has them.
type dirIdentity struct {
	dev, ino uint64
	known    bool
}

// statDir returns the identity of the store's directory now. Errors: the
// filesystem's (fs.ErrNotExist for a removed directory).
func (s *Store) statDir() (dirIdentity, error) {
	fi, err := s.fs.Stat(s.cfg.Dir)
	if err != nil {
		return dirIdentity{}, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return dirIdentity{dev: uint64(st.Dev), ino: uint64(st.Ino), known: true}, nil
	}
	return dirIdentity{}, nil
}

// dirGone returns an error wrapping errDirGone when the store's directory
// is no longer the one it opened (removed, or another at its path), nil
// while it is or when that cannot be told.
func (s *Store) dirGone() error {
	now, err := s.statDir()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w (%v)", errDirGone, err)
	case err != nil:
		return nil // another failure: the write path meets it
	case s.dirID.known && now.known && now != s.dirID:
		return fmt.Errorf("%w (another directory is at its path)", errDirGone)
	}
	return nil
}
