package instance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotRunning: no live tierd holds the log dirs.
var ErrNotRunning = errors.New("instance: no running tierd holds the log dirs")

// Running returns the tierd process that holds the lock files of dirs now,
// found by the records Lock.Record wrote: a process on this host with that
// pid, alive, which (where /proc tells) has the lock file open. Errors:
// ErrNotRunning (wrapped, saying why) when no dir's record names such a
// process; it never takes a lock itself, so a tierd starting meanwhile is
// not disturbed.
func Running(dirs []string) (Holder, error) {
	host, _ := os.Hostname()
	var why []string
	for _, d := range dirs {
		p := filepath.Join(d, LockFile)
		h := readHolder(p)
		switch {
		case h.PID <= 0:
			why = append(why, fmt.Sprintf("%s names no process", p))
		case h.Host != "" && h.Host != host:
			why = append(why, fmt.Sprintf("%s names pid %d on host %s, not this one (%s)", p, h.PID, h.Host, host))
		case syscall.Kill(h.PID, 0) != nil:
			why = append(why, fmt.Sprintf("%s names pid %d, which is not running", p, h.PID))
		case !holdsOpen(h.PID, p):
			why = append(why, fmt.Sprintf("%s names pid %d, which does not hold it (another process took the pid)", p, h.PID))
		default:
			return h, nil
		}
	}
	return Holder{}, fmt.Errorf("%w: %v", ErrNotRunning, why)
}

// HoldsOpen reports whether process pid has file p open, by its
// /proc/<pid>/fd links; true where /proc cannot tell. For a tierd found
// by a pid in a file that may be stale (another process may have taken
// the pid since): ask whether it holds a file only that tierd holds.
func HoldsOpen(pid int, p string) bool { return holdsOpen(pid, p) }

func holdsOpen(pid int, p string) bool {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return true
	}
	want, err := filepath.Abs(p)
	if err != nil {
		return true
	}
	if w, err := filepath.EvalSymlinks(want); err == nil {
		want = w
	}
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && target == want {
			return true
		}
	}
	return false
}
