package grpcapi

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
)

// A finished copy whose .log object in the bucket is shorter than its row
// says (truncated: the body ends cleanly before the bytes asked for, which
// is a damaged copy, not a failed load) is not answered as a short read:
// Fetch from its start is the error that a Fetch from the offsets past
// the cut gets, DATA_LOSS as for a corrupt copy (not a retryable
// UNAVAILABLE, nor an OK answer with the batches before the cut).
func TestTruncatedCopyNotShortAnswer(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PrefetchBytes = 0
	var mu sync.Mutex
	var told []remotelog.SegmentID
	e := newEnv(t, cfg, WithEngine(remoteread.WithMissingCopyHook(func(m remotelog.SegmentMetadata) { mu.Lock(); told = append(told, m.ID); mu.Unlock() })))
	readtest.ReferenceLog(t, e.Rig)
	fin, err := e.Store.FinishedSegments(e.TP)
	if err != nil || len(fin) == 0 {
		t.Fatal(len(fin), err)
	}
	key := e.Mgr.Key(fin[0], ".log")
	ctx := context.Background()
	rc, err := e.Bucket.GetRange(ctx, key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	cut := data[:20000]
	if err := e.Bucket.Upload(ctx, key, bytes.NewReader(cut), int64(len(cut))); err != nil {
		t.Fatal(err)
	}
	var code [2]codes.Code
	for i, off := range []int64{3, 0} {
		resp, err := e.api.Fetch(ctx, &tierdpb.FetchRequest{Topic: "t", Offset: off, MaxBytes: 1 << 20})
		t.Logf("offset %d: %v; next %d, %d bytes", off, err, resp.GetNextOffset(), len(resp.GetRecords()))
		code[i] = status.Code(err)
		if err == nil {
			t.Errorf("Fetch at %d of a truncated copy: OK, next %d, %d bytes; want an error", off, resp.GetNextOffset(), len(resp.GetRecords()))
		}
	}
	if code[0] != code[1] || code[0] != codes.DataLoss {
		t.Errorf("Fetch at 0 answered %v, at 3 (past the cut) %v; want DATA_LOSS for both (a damaged copy, as a corrupt one)", code[1], code[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) == 0 || told[0] != fin[0].ID {
		t.Errorf("copies reported for a check: %v, want the truncated %v (so that the copier marks it damaged)", told, fin[0].ID)
	}
}
