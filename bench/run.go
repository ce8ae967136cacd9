package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Run sets up a bucket (starting MinIO when cfg.S3Endpoint is empty), a
// partition of cfg.TotalBytes tiered by the copier, tierd's fetch server,
// its Kafka listener and a transport-floor server on real sockets, then
// measures every case
// in turn. Progress lines go to progress. Errors: a bad config, a setup
// step that failed, or a read that failed or answered wrong bytes.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e, err := setup(ctx, cfg, progress)
	if err != nil {
		return nil, err
	}
	defer e.close()
	rep := &Report{SegmentBytes: cfg.SegmentBytes, ChunkBytes: cfg.ChunkBytes}
	step := func(name string, f func() error) error {
		t := time.Now()
		err := f()
		fmt.Fprintf(progress, "%-28s %s\n", name, time.Since(t).Round(time.Millisecond))
		return err
	}
	ss := e.samples()
	var raw, cold, kcold, coldAll, warm, local, floorR, replay, kreplay, seq, mem *Result
	steps := []struct {
		name string
		f    func() error
	}{
		{"raw_get + fetch_cold + kafka_fetch_cold", func() (err error) { raw, cold, kcold, coldAll, err = e.coldAndRaw(ctx, ss); return err }},
		{"fetch_warm", func() (err error) { warm, err = e.warm(ctx, ss); return err }},
		{"local_read", func() (err error) { local, err = e.local(ss); return err }},
		{"grpc_floor", func() (err error) { floorR, err = e.floorCase(ctx, ss); return err }},
		{"raw_seq_get", func() (err error) { seq, err = e.rawSeqGet(ctx); return err }},
		{fmt.Sprintf("replay + kafka_replay (x%d)", cfg.Rounds), func() (err error) { replay, kreplay, err = e.replays(ctx); return err }},
		{fmt.Sprintf("replay_%d (memory)", cfg.Readers), func() (err error) { mem, err = e.memory(ctx, cfg.DaemonBin); return err }},
	}
	for _, s := range steps {
		if err := step(s.name, s.f); err != nil {
			return nil, err
		}
	}
	rep.Results = []*Result{raw, cold, kcold, coldAll, warm, local, floorR, seq, replay, kreplay, mem}
	for _, r := range rep.Results {
		r.finish()
	}
	return rep, nil
}
