package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/tlsreload"
)

// tlsRefusal explains why a tool's TLS connection to the gRPC API failed:
// it returns nil when tls.grpc is off or nothing listens at
// cfg.Fetch.Listen (no tierd runs), and otherwise the error of one TLS
// handshake with the tools' settings, naming them.
func tlsRefusal(cfg config.Config) error {
	if config.Mode(cfg.TLS.GRPC) == config.TLSOff {
		return nil
	}
	t := cfg.TLS
	tc, err := tlsreload.ClientConfig(tlsreload.ClientFiles{CAFile: t.CAFile, CertFile: t.ClientCertFile, KeyFile: t.ClientKeyFile, ServerName: t.ServerName})
	if err != nil {
		return fmt.Errorf("tls: the tools' client settings: %w", err)
	}
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(cfg.Fetch.Listen)
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: tc}
	conn, err := d.Dial("tcp", cfg.Fetch.Listen)
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return nil // nothing listens: tierd is not running
	}
	if err != nil {
		return fmt.Errorf("a server answers at %s (fetch.listen) but the TLS handshake failed; check tls.ca_file, tls.client_cert_file, tls.client_key_file and tls.server_name: %w",
			cfg.Fetch.Listen, err)
	}
	defer conn.Close()
	return certificateRefused(conn.(*tls.Conn), cfg.Fetch.Listen, t.ClientCertFile != "")
}

// dialTierd connects a tool to the gRPC API at cfg.Fetch.Listen, over TLS
// when tls.grpc is not off (trusting tls.ca_file, presenting
// tls.client_cert_file).
//
// With fetch.client.token_file, every call carries its token.
func dialTierd(cfg config.Config) (*grpcapi.Client, error) {
	var opts []grpcapi.DialOption
	tok, err := clientToken(cfg)
	if err != nil {
		return nil, err
	}
	t := cfg.TLS
	if tok != "" {
		// Over plaintext whoever listens at fetch.listen would read it:
		// on loopback too, any local user who binds the port while tierd
		// is stopped. Over TLS the server's certificate is checked first.
		if config.Mode(t.GRPC) == config.TLSOff {
			return nil, errors.New("fetch: client.token_file: a token goes to fetch.listen only over TLS (tls.grpc: tls or mtls, and tls.ca_file): over plaintext whoever listens at the address could read it")
		}
		opts = append(opts, grpcapi.WithToken(tok))
	}
	if config.Mode(t.GRPC) == config.TLSOff {
		return grpcapi.Dial(cfg.Fetch.Listen, opts...)
	}
	tc, err := tlsreload.ClientConfig(tlsreload.ClientFiles{CAFile: t.CAFile, CertFile: t.ClientCertFile, KeyFile: t.ClientKeyFile, ServerName: t.ServerName})
	if err != nil {
		return nil, fmt.Errorf("tls: the tools' client settings: %w", err)
	}
	return grpcapi.Dial(cfg.Fetch.Listen, append(opts, grpcapi.WithClientTLS(tc))...)
}
