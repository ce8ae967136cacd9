package listener

import (
	"errors"
	"syscall"
)

// peerClosed reports whether the client has closed its end of the
// connection or reset it, without consuming anything it sent: a
// non-blocking peek at one byte reads end of file (or ECONNRESET). Bytes
// waiting (a request pipelined behind the one being answered) mean the
// client is still there, and stay unread. A connection that is not a
// socket (tests) is never reported closed, nor is one whose state cannot
// be read.
//
// A long-polling Fetch calls it on every poll interval: the connection is
// not read while a request is in progress, so without it a client that
// went away would hold its connection slot, and the poll its CPU, until
// max_wait_ms (up to 24 days) ends.
func (c *conn) peerClosed() bool {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && rerr == nil) || errors.Is(rerr, syscall.ECONNRESET)
		return true // never wait for data
	})
	return err == nil && closed
}
