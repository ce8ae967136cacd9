package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc/credentials"
)

// MaxSocketPath is the longest path a Unix socket may have on Linux,
// bytes (sun_path's 108 bytes less the terminating NUL).
const MaxSocketPath = 107

// ListenLocal listens on the admin socket at path: a Unix socket, mode
// 0600, in a directory of its own (path's parent, created 0700; refused
// when group or other users may enter it, or when it belongs to another
// user, who could replace the socket), so that only tierd's user (and
// root) can open it. A socket left at path by a tierd that ended (one
// that refuses connections) is removed first; a socket that answers is
// another process's and an error, as is any other file there and a path
// longer than MaxSocketPath.
func ListenLocal(path string) (net.Listener, error) {
	if len(path) > MaxSocketPath {
		return nil, fmt.Errorf("fetch: admin socket %s is %d bytes long, more than the %d a Unix socket path may be: set fetch.admin.socket to a shorter path",
			path, len(path), MaxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fetch: admin socket: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("fetch: admin socket: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("fetch: admin socket: directory %s has mode %v: other users could reach the socket; want 0700 (chmod 700 %s)", dir, st.Mode().Perm(), dir)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("fetch: admin socket: directory %s belongs to uid %d, not to tierd's user (uid %d): its owner could put a socket of theirs at %s; remove it, or set fetch.admin.socket elsewhere",
			dir, sys.Uid, os.Geteuid(), filepath.Base(path))
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("fetch: admin socket: %s exists and is not a socket; refusing to remove it", path)
		}
		// A stopped tierd's socket refuses connections; one that
		// answers is a running process's (a second tierd given the same
		// fetch.admin.socket): taking it would cut that one off.
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("fetch: admin socket: %s answers: another process (a tierd with the same fetch.admin.socket?) serves it; refusing to take it over", path)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("fetch: admin socket: %s exists and cannot be checked for a listener; refusing to remove it: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("fetch: admin socket: remove the socket a stopped tierd left: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("fetch: admin socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("fetch: admin socket: %w", err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("fetch: admin socket: %w", err)
	}
	return lis, nil
}

// localAuth is the AuthInfo of a caller on the admin socket.
type localAuth struct {
	uid       int // -1: unknown
	principal string
}

func (localAuth) AuthType() string { return "local" }

// localCreds are the admin socket's transport credentials: no handshake;
// the caller is the local user the kernel says opened the connection.
type localCreds struct{}

func (localCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("fetch: localCreds are server credentials")
}

func (localCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uid := peerUID(c)
	return c, localAuth{uid: uid, principal: localPrincipal(uid)}, nil
}

func (localCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "local"}
}

func (l localCreds) Clone() credentials.TransportCredentials { return l }

func (localCreds) OverrideServerName(string) error { return nil }

// localPrincipal is "User:" and the name of the local user uid, or of
// the user running this process when uid is unknown (-1).
func localPrincipal(uid int) string {
	if uid < 0 {
		uid = os.Getuid()
	}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return "User:" + u.Username
	}
	return "User:uid-" + strconv.Itoa(uid)
}

// LocalCaller is the caller of an in-process Admin (NewAdmin): the user
// running this process, who could open the metadata dir.
func LocalCaller() Caller {
	return Caller{Principal: localPrincipal(-1), Local: true, UID: -1}
}
