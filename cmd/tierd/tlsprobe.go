package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// plainToTLS explains why a tool that speaks plaintext to the gRPC API
// (grpcMode, its config's tls.grpc, is "" or "off") got no answer at
// listen: when a server there speaks TLS (plainTalksToTLS), an error
// naming the settings to add; otherwise, and for a tool that speaks
// TLS, nil.
func plainToTLS(grpcMode, listen string) error {
	if grpcMode != "" && grpcMode != "off" {
		return nil // tlsRefusal explains a TLS tool's failure
	}
	if !plainTalksToTLS(listen) {
		return nil
	}
	return fmt.Errorf("a tierd speaking TLS answers at %s (fetch.listen), and this config's tls.grpc is off, so the tools spoke plaintext to it: "+
		"add to the config's tls: section grpc: tls (mtls when that tierd asks for a client certificate, with client_cert_file and client_key_file) "+
		"and ca_file: the CA that signed its certificate", listen)
}

// plainTalksToTLS reports whether the server at addr answers a TLS
// ClientHello with a TLS handshake. A TLS server does not answer a
// plaintext client at all, so a tool dialling one in plaintext would take
// it for stopped. The handshake trusts any certificate, since it only
// tells TLS from plaintext, and nothing is sent over it. A server that
// asks for a client certificate and refuses the missing one (an alert)
// speaks TLS too.
func plainTalksToTLS(addr string) bool {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		Config: &tls.Config{InsecureSkipVerify: true}} // only tells TLS from plaintext; no data is sent
	conn, err := d.Dial("tcp", addr)
	if err == nil {
		conn.Close()
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "remote error" // a TLS alert
}
