package main

import (
	"log/slog"
	"net"
	"net/netip"

	"github.com/tierd/tierd/authz"
)

// newAuthorizer builds the Authorizer of cfg.ACLs over its source: the
// Kafka cluster's ACLs through d's cluster client, or the ACL file.
func newAuthorizer(cfg config, d *daemon, log *slog.Logger) (*authz.Authorizer, error) {
	var src authz.Source = authz.FileSource{Path: cfg.ACLs.File}
	if cfg.ACLs.Source == "cluster" {
		src = d.kafka
	}
	return authz.New(cfg.ACLs.Config, src, authz.WithLogger(log.With("component", "acls")), authz.WithRegisterer(d.reg))
}

// loopbackOnly reports whether listen (host:port) accepts connections
// from this host alone: its host a loopback address or "localhost".
func loopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
