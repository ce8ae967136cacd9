package bench

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
)

// objectsFetches is how many cold Fetches of the objects case each
// variant makes per round through tierd's fetch server.
const objectsFetches = 40

// objectsFetchCold measures cold Fetches through tierd's read path (gRPC
// fetch server, chunk cache emptied before each, remote indexes kept) of
// the copies metas of segs, stored by m: a metadata store of its own
// holds their finished rows (form, stored size, encryption as the copy
// made them). Each answer is checked against the local file.
func (e *env) objectsFetchCold(ctx context.Context, m *rsm.Manager, metas []remotelog.SegmentMetadata, segs []objectsSegment, dir string, rng *mrand.Rand) (_ []time.Duration, err error) {
	defer os.RemoveAll(dir) // after the store closes
	store, err := rlmm.Open(rlmm.Config{Dir: filepath.Join(dir, "metadata")})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	for _, meta := range metas {
		started := meta
		started.State, started.StoredSizeInBytes, started.Encrypted = remotelog.CopySegmentStarted, 0, false
		if err := store.AddSegment(started); err != nil {
			return nil, err
		}
		if _, err := store.UpdateStates(meta.TopicPartition, []remotelog.SegmentMetadata{meta}, remotelog.CopySegmentFinished); err != nil {
			return nil, err
		}
	}
	srv, err := grpcapi.NewServer(e.cfg.FetchConfig(), store, m, grpcapi.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		return nil, err
	}
	lis, err := listen()
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, lis) }()
	defer func() {
		cancel()
		<-done
	}()
	c, err := grpcapi.Dial(lis.Addr().String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !c.WaitReady(wctx) {
		return nil, fmt.Errorf("objects: the fetch server did not come up")
	}
	tp := metas[0].TopicPartition
	fetch := func(offset int64, maxBytes int32) (*tierdpb.FetchResponse, error) {
		return fetchRetry(ctx, c, &tierdpb.FetchRequest{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, MaxBytes: maxBytes}, nil)
	}
	for _, meta := range metas { // every offset index loaded, as for a partition in use
		if _, err := fetch(meta.StartOffset, 1); err != nil {
			return nil, fmt.Errorf("objects: load the indexes: %w", err)
		}
	}
	var out []time.Duration
	for range objectsFetches {
		s := segs[rng.IntN(len(segs))]
		j := rng.IntN(len(s.batches))
		want := s.answer(j, int64(e.cfg.MaxBytes))
		srv.Engine().DropCaches(false)
		t := time.Now()
		resp, err := fetch(s.offsets[j], e.cfg.MaxBytes)
		out = append(out, time.Since(t))
		srv.Engine().Settle()
		if err != nil {
			return nil, fmt.Errorf("objects: fetch of offset %d: %w", s.offsets[j], err)
		}
		if !bytes.Equal(resp.GetRecords(), want) {
			return nil, fmt.Errorf("objects: fetch of offset %d answered %d bytes that are not the local file's %d", s.offsets[j], len(resp.GetRecords()), len(want))
		}
	}
	return out, nil
}

// answer is what a Fetch of batch j's base offset answers: whole batches
// from j within maxBytes (the first always), from the local file.
func (s objectsSegment) answer(j int, maxBytes int64) []byte {
	start, end := s.batches[j], s.ends[j]
	for k := j + 1; k < len(s.batches) && s.ends[k]-start <= maxBytes; k++ {
		end = s.ends[k]
	}
	return s.data[start:end]
}
