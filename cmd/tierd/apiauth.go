package main

import (
	"fmt"
	"strings"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
)

// clientToken reads the tools' token from fetch.client.token_file, ""
// when none is set.
func clientToken(cfg config.Config) (string, error) {
	p := cfg.Fetch.Auth.ClientTokenFile
	if p == "" {
		return "", nil
	}
	f, err := daemon.OpenPrivate(p, "fetch: client.token_file", true)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b [4096]byte
	n, _ := f.Read(b[:])
	tok, _, _ := strings.Cut(string(b[:n]), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("fetch: client.token_file %s holds no token", p)
	}
	return tok, nil
}
