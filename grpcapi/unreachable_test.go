package grpcapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
)

// A read that cannot finish while the object store does not answer says
// "object store unreachable" with the store's answer, through ReadRemote
// and the Fetch RPC (UNAVAILABLE), not "still loading"; the same read with
// the store up still says "still loading"; definite answers (out of range)
// stay as they are during an outage.
func TestReadDuringOutageSaysUnreachable(t *testing.T) {
	var down error
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 50
	cfg.PrefetchBytes = 0
	e := newEnv(t, cfg, WithEngine(remoteread.WithStoreHealth(func() error { return down })))
	readtest.ReferenceLog(t, e.Rig)
	gate := make(chan struct{})
	e.Bucket.Gate.Store(&gate)
	t.Cleanup(func() { close(gate) })
	ctx := context.Background()

	if _, err := e.srv.Engine().ReadRemote(ctx, e.TP, 500, 1); !errors.Is(err, remoteread.ErrStillLoading) || errors.Is(err, remoteread.ErrStoreUnreachable) {
		t.Fatalf("store up: %v, want remoteread.ErrStillLoading only", err)
	}
	down = errors.New("minio:127.0.0.1:9000/tierd: dial tcp 127.0.0.1:9000: connect: connection refused")
	_, err := e.srv.Engine().ReadRemote(ctx, e.TP, 300, 1)
	if !errors.Is(err, remoteread.ErrStoreUnreachable) || !strings.Contains(err.Error(), "object store unreachable: minio:127.0.0.1:9000/tierd: dial tcp") {
		t.Fatalf("store down: %v, want remoteread.ErrStoreUnreachable with the store's answer", err)
	}
	_, err = e.api.Fetch(ctx, &tierdpb.FetchRequest{Topic: e.TP.Topic, Partition: e.TP.Partition, Offset: 100, MaxBytes: 1})
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "object store unreachable: ") {
		t.Fatalf("Fetch during the outage: %v, want UNAVAILABLE saying the store is unreachable", err)
	}
	var re *remoteread.RangeError
	if _, err := e.srv.Engine().ReadRemote(ctx, e.TP, 1<<40, 1); !errors.As(err, &re) {
		t.Fatalf("out of range during the outage: %v, want *remoteread.RangeError", err)
	}
}
