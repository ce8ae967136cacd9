package grpcapi

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A second tierd given the same fetch.admin.socket (two configs, one
// path) must not take the socket of a tierd that still serves it: the
// running one's socket stays, and answers.
func TestListenLocalLiveSocketKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin", "tierd.sock")
	lis, err := ListenLocal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	second, err := ListenLocal(path)
	if err == nil {
		second.Close()
		t.Fatal("a second ListenLocal took over a socket another listener serves")
	}
	if !strings.Contains(err.Error(), "answers") {
		t.Errorf("error %q does not say the socket answers", err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the first listener's socket no longer answers: %v", err)
	}
	c.Close()
}

// A socket directory owned by another user (created before tierd
// started, or a symlink to one) lets its owner replace the socket with
// theirs, even at mode 0700: it is refused.
func TestListenLocalForeignDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	root := t.TempDir()
	foreign := filepath.Join(root, "planted")
	if err := os.Mkdir(foreign, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(foreign, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if lis, err := ListenLocal(filepath.Join(foreign, "tierd.sock")); err == nil {
		lis.Close()
		t.Fatal("ListenLocal in a directory of uid 4242")
	} else if !strings.Contains(err.Error(), "4242") {
		t.Errorf("error %q does not name the directory's owner", err)
	}
	link := filepath.Join(root, "admin")
	if err := os.Symlink(foreign, link); err != nil {
		t.Fatal(err)
	}
	if lis, err := ListenLocal(filepath.Join(link, "tierd.sock")); err == nil {
		lis.Close()
		t.Fatal("ListenLocal through a symlink to a directory of uid 4242")
	}
	if _, err := os.Lstat(filepath.Join(foreign, "tierd.sock")); !os.IsNotExist(err) {
		t.Fatalf("a socket was made in the foreign directory: %v", err)
	}
}
