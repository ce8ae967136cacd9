package listener

import (
	"context"
	"crypto/tls"
)

// WithTLS serves Kafka clients over TLS with c (Kafka's
// security.protocol=SSL on the client): a server config with a
// certificate and, for mutual TLS (Kafka's ssl.client.auth=required),
// client authentication. c may take its certificate from GetCertificate
// or GetConfigForClient, so it can be replaced while serving. Metadata
// still advertises the same host:port. Default: plaintext.
func WithTLS(c *tls.Config) Option { return func(s *Server) { s.tls = c } }

// handshake completes the TLS handshake of a TLS connection, within
// connections.max.idle.ms, before the first request is read; it does
// nothing for a plaintext one. A failed handshake (a client without a
// certificate under mutual TLS, one that does not trust tierd's, one
// speaking plaintext) closes the connection with reason
// tls_handshake_failed, logged once per client.
func (c *conn) handshake(ctx context.Context) *closeErr {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, c.s.cfg.idle())
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		if c.isStopped() {
			return &closeErr{reason: reasonShutdown, err: err}
		}
		return &closeErr{reason: reasonTLS, err: err}
	}
	return nil
}
