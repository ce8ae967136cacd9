package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/proto/tierdpb"
)

// fakeIdentity answers Identity as the tierd of dir would.
type fakeIdentity struct {
	tierdpb.UnimplementedAdminServer
	dir string
}

func (f fakeIdentity) Identity(context.Context, *tierdpb.IdentityRequest) (*tierdpb.IdentityResponse, error) {
	return &tierdpb.IdentityResponse{MetadataDir: f.dir, InstanceId: "planted"}, nil
}

// With fetch.admin.socket outside the metadata dir, another user may
// create the socket's directory before tierd does and put a socket of
// theirs there that answers Identity as the configured tierd would: the
// tools must not send their commands to it. A socket or directory owned
// by neither the metadata dir's owner nor root is refused.
func TestToolsRefusePlantedSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	root := t.TempDir()
	meta := filepath.Join(root, "meta")
	os.Mkdir(meta, 0o700)
	planted := filepath.Join(root, "run")
	os.Mkdir(planted, 0o700)
	sock := filepath.Join(planted, "tierd.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{planted, sock} {
		os.Chown(p, 4242, 4242)
	}
	gs := grpc.NewServer()
	tierdpb.RegisterAdminServer(gs, fakeIdentity{dir: meta})
	go gs.Serve(lis)
	defer gs.Stop()
	var cfg config.Config
	cfg.Metadata.Dir = meta
	cfg.Fetch.Auth.AdminSocket = sock
	c, err := dialSocket(context.Background(), cfg)
	if c != nil {
		c.Close()
		t.Fatal("the tools reached a socket of uid 4242 as the running tierd")
	}
	if err == nil || !strings.Contains(err.Error(), "4242") {
		t.Errorf("dialSocket: %v, want an error naming the socket's owner", err)
	}
}
