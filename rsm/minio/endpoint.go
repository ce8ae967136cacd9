package minio

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// target returns the endpoint's host:port and whether it speaks TLS: from
// a URL (http:// plain, https:// TLS; no path), or from host:port and
// Insecure.
func (c Config) target() (host string, secure bool, err error) {
	if !strings.Contains(c.Endpoint, "://") {
		if _, _, err := net.SplitHostPort(c.Endpoint); err != nil || strings.Contains(c.Endpoint, "/") {
			return "", false, fmt.Errorf("minio: endpoint %q: want a URL such as http://127.0.0.1:9000", c.Endpoint)
		}
		return c.Endpoint, !c.Insecure, nil
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil ||
		(u.Scheme != "http" && u.Scheme != "https") {
		return "", false, fmt.Errorf("minio: endpoint %q: want http:// or https:// and host[:port], no path", c.Endpoint)
	}
	if c.Insecure && u.Scheme == "https" {
		return "", false, fmt.Errorf("minio: endpoint %q is https and Insecure is set", c.Endpoint)
	}
	return u.Host, u.Scheme == "https", nil
}
