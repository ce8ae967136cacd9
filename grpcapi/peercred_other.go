//go:build !linux

package grpcapi

import (
	"net"
)

// peerUID is -1 where SO_PEERCRED does not exist: the caller is named as
// the user running tierd (only that user can open the socket).
func peerUID(net.Conn) int { return -1 }
