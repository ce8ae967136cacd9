package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/privfile"
	"github.com/tierd/tierd/rlmm"
)

// dialRunning connects to the tierd running with cfg's metadata dir: at
// cfg.Fetch.Listen, else at the address its runtime file records (a
// fetch.listen changed in the file and refused until a restart). where
// names it for the tools' output ("the running tierd at X", and when the
// file's address is not the running one, both). It returns a nil client
// when none answers. It refuses a tierd whose metadata dir is not cfg's.
//
// The admin socket (fetch.admin.socket) comes first: it serves every
// service, the Admin service among them, to tierd's own user; the TCP
// address serves Admin only with authentication (fetch.tokens_file,
// tls.grpc: mtls).
func dialRunning(ctx context.Context, cfg config.Config) (c *grpcapi.Client, where string, err error) {
	if c, err = dialSocket(ctx, cfg); c != nil || err != nil {
		where = "the running tierd at " + cfg.Fetch.Listen
		if rt, ok := daemon.ReadRuntime(cfg.Metadata.Dir); ok && rt.FetchListen != "" && rt.FetchListen != cfg.Fetch.Listen {
			where = fmt.Sprintf("the running tierd (pid %d) at %s; the file says fetch.listen %s (a restart applies it)", rt.PID, rt.FetchListen, cfg.Fetch.Listen)
		}
		return c, where + " (through its admin socket " + daemon.AdminSocket(cfg) + ")", err
	}
	c, err = dialAt(ctx, cfg)
	if c != nil || err != nil {
		return c, "the running tierd at " + cfg.Fetch.Listen, err
	}
	rt, ok := daemon.ReadRuntime(cfg.Metadata.Dir)
	if !ok || rt.FetchListen == "" || rt.FetchListen == cfg.Fetch.Listen {
		return nil, "", nil
	}
	alt := cfg
	alt.Fetch.Listen = rt.FetchListen
	if c, err = dialAt(ctx, alt); c == nil || err != nil {
		return c, "", err
	}
	return c, fmt.Sprintf("the running tierd (pid %d) at %s; the file says fetch.listen %s (a restart applies it)", rt.PID, rt.FetchListen, cfg.Fetch.Listen), nil
}

// metadataPresent returns nil when cfg's metadata dir holds a store, so
// that a tool may open the stopped tierd's store; otherwise an error
// saying that no tierd answered and, when the dir does not exist or holds
// no store (empty), that no tierd has run with this configuration yet
// (the store is created by the first `tierd run`; a tool never creates
// it).
func metadataPresent(cfg config.Config) error {
	_, err := os.Stat(cfg.Metadata.Dir)
	switch {
	case err == nil:
		ok, err := rlmm.Exists(cfg.Metadata.Dir)
		if err != nil {
			return fmt.Errorf("no tierd answers at %s, and metadata.dir: %w", cfg.Fetch.Listen, err)
		}
		if !ok {
			return fmt.Errorf("no tierd answers at %s, and metadata.dir %s holds no metadata store: no tierd has run with this configuration yet (start one with `tierd run --config FILE`)",
				cfg.Fetch.Listen, cfg.Metadata.Dir)
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no tierd answers at %s, and metadata.dir %s does not exist: no tierd has run with this configuration yet (start one with `tierd run --config FILE`): %w",
			cfg.Fetch.Listen, cfg.Metadata.Dir, err)
	default:
		return fmt.Errorf("no tierd answers at %s, and metadata.dir: %w", cfg.Fetch.Listen, err)
	}
}

// dialSocket connects to the running tierd's admin socket; nil when no
// tierd listens there (no socket, or one a stopped tierd left) or cfg's
// metadata dir does not exist (no tierd has run), an error when this
// user may not open it or when the socket or its directory belongs to
// neither the metadata dir's owner nor root (socketOwners).
func dialSocket(ctx context.Context, cfg config.Config) (*grpcapi.Client, error) {
	path := daemon.AdminSocket(cfg)
	if ok, err := socketOwners(cfg, path); !ok || err != nil {
		return nil, err
	}
	probe, err := net.DialTimeout("unix", path, 2*time.Second)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("the admin socket %s cannot be reached by this user (its directory and the socket are the user tierd runs as' alone), so whether a tierd runs cannot be told either: run the tool as that user or root, or reach fetch.listen with a token (fetch.client.token_file, docs/security.md): %w", path, err)
	case err != nil:
		return nil, nil // nothing listens
	}
	probe.Close()
	c, err := grpcapi.Dial("unix://" + path)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	up := c.WaitReady(pctx)
	cancel()
	if !up {
		c.Close()
		return nil, nil
	}
	if err := checkIdentity(ctx, c, cfg, path+" (the admin socket)"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// socketOwners checks who owns an admin socket outside the metadata
// dir (fetch.admin.socket elsewhere) and its directory before a tool
// trusts what answers there: another user could have made the directory
// first and put a socket of theirs there answering Identity as this
// tierd would. Each must belong to root, to the user running the tool,
// or to the owner of cfg's metadata dir (tierd's user). A socket inside
// the metadata dir is as safe as the dir itself. ok is false, with no
// error, when there is nothing to reach: no metadata dir, or no socket.
func socketOwners(cfg config.Config, path string) (ok bool, err error) {
	mst, err := os.Stat(cfg.Metadata.Dir)
	if err != nil {
		return false, nil
	}
	if _, err := os.Lstat(path); err != nil {
		return false, nil
	}
	meta := daemon.Identity(cfg, "").MetadataDir
	if rel, err := filepath.Rel(meta, path); err == nil && filepath.IsLocal(rel) {
		return true, nil
	}
	owner, known := privfile.Owner(mst)
	for _, p := range []string{filepath.Dir(path), path} {
		st, err := os.Stat(p)
		if err != nil {
			return false, nil
		}
		if uid, ok := privfile.Owner(st); known && ok && uid != 0 && uid != os.Geteuid() && uid != owner {
			return false, fmt.Errorf("the admin socket's %s belongs to uid %d, neither root, this user (uid %d) nor the owner of metadata.dir %s (uid %d): another user's socket could answer as this tierd; refusing it (remove it, or set fetch.admin.socket inside a directory of tierd's user)",
				p, uid, os.Geteuid(), cfg.Metadata.Dir, owner)
		}
	}
	return true, nil
}
