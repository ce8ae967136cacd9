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

// certificateRefused explains a TLS connection to the gRPC API at listen
// whose handshake completed but that the server then refused with an
// alert: in TLS 1.3 the client's side of the handshake ends before the
// server has checked the client's certificate, so a server that requires
// one (tls.grpc: mtls) and got none, or refused it, says so on the first
// read. It returns nil when the server says nothing within a second (a
// gRPC server waits for the client to speak first). hasCert says whether
// the tool presented a certificate (tls.client_cert_file).
func certificateRefused(conn *tls.Conn, listen string, hasCert bool) error {
	if err := conn.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		return nil
	}
	_, err := conn.Read(make([]byte, 1))
	var opErr *net.OpError
	if !errors.As(err, &opErr) || opErr.Op != "remote error" { // a TLS alert
		return nil
	}
	if !hasCert {
		return fmt.Errorf("the tierd at %s (fetch.listen) requires a client certificate (its tls.grpc is mtls) and this config has none: "+
			"set tls.grpc: mtls, tls.client_cert_file and tls.client_key_file (a certificate that chains to its tls.client_ca_file) (%w)", listen, err)
	}
	return fmt.Errorf("the tierd at %s (fetch.listen) refused this tool's client certificate (tls.client_cert_file, tls.client_key_file): "+
		"it must chain to that tierd's tls.client_ca_file (%w)", listen, err)
}
