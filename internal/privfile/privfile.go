// Package privfile checks a file that says who may do what (tokens,
// credentials, ACLs) before it is believed: whoever may write it may
// give themselves any right, so it must be writable by nobody but this
// process's user and root.
package privfile

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Check returns nil when the file st describes (the Stat of the opened
// file, so that a symlink is judged by its target) is owned by this
// process's effective user or by root and is not writable by its group
// or other users; else an error naming path, its owner or mode, and the
// fix. what names the setting ("fetch: tokens_file").
func Check(what, path string, st fs.FileInfo) error {
	if m := st.Mode().Perm(); m&0o022 != 0 {
		return fmt.Errorf("%s: %s has mode %v: its group or other users may change it (a line added is a right); chmod go-w %s", what, path, m, path)
	}
	if uid, ok := Owner(st); ok && uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("%s: %s belongs to uid %d, neither tierd's user (uid %d) nor root: its owner may change it (a line added is a right); chown it to tierd's user or root",
			what, path, uid, os.Geteuid())
	}
	return nil
}

// Owner is the uid owning the file st describes; ok is false where the
// platform does not say.
func Owner(st fs.FileInfo) (uid int, ok bool) {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Uid), true
	}
	return -1, false
}
