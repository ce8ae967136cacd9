package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tierd/tierd/copier"
)

// Run sets up a bucket (starting MinIO when cfg.S3Endpoint is empty;
// none when only the codecs case and the scale cases on the filesystem
// bucket run)
// and runs the selected cases (cfg.Cases) in turn: for the read path, a
// partition of cfg.TotalBytes tiered by the copier, tierd's fetch server,
// its Kafka listener and a transport-floor server on real sockets; the
// growth cases build their own partitions, metadata and buckets. Progress
// lines go to progress. Errors: a bad config, a setup step that failed,
// or a read that failed or answered wrong bytes. A growth case's size
// that takes longer than cfg.CaseTimeout is not an error: the report
// says it timed out.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	needLog := cfg.runs("read") || cfg.runs("copy") || cfg.runs("readers") || cfg.runs("plugin")
	// The store: the read path's, and the scale cases' when they run on
	// the minio bucket (codecs and the filesystem bucket need none).
	needStore := needLog || cfg.runs("objects") || ((cfg.runs("scale_partitions") || cfg.runs("scale_segments")) && slices.Contains(cfg.ScaleBuckets, "minio"))
	e, err := setup(ctx, cfg, progress, needLog, needStore)
	if err != nil {
		return nil, err
	}
	defer e.close()
	rep := &Report{SegmentBytes: cfg.SegmentBytes, ChunkBytes: cfg.ChunkBytes, StoreLatency: cfg.StoreLatency, ObjectsStoreLatency: cfg.objectsLatency(),
		IdleInterval: copier.DefaultConfig().Interval(), Rounds: cfg.Rounds, Partitions: cfg.Partitions, Copies: cfg.Copies, ReaderCounts: cfg.ReaderCounts,
		PrefetchBytes: cfg.PrefetchBytes, ReaderBytes8: cfg.readerBytes(8)}
	if cfg.runs("read") {
		if v, ok := firstTouchProbe(); ok {
			rep.FirstTouchCPUPerGiB = &v
		}
	}
	step := func(name string, f func() error) error {
		t := time.Now()
		err := f()
		fmt.Fprintf(progress, "%-28s %s\n", name, time.Since(t).Round(time.Millisecond))
		return err
	}
	type stepT struct {
		name string
		f    func() error
	}
	var steps []stepT
	if cfg.runs("read") {
		ss := e.samples()
		var raw, cold, scold, kcold, coldAll, warm, local, floorR, replay, kreplay, seq, mem *Result
		steps = append(steps, []stepT{
			{"raw_get + fetch_cold + fetch_cold_stream + kafka_fetch_cold", func() (err error) {
				raw, cold, scold, kcold, coldAll, err = e.coldAndRaw(ctx, ss)
				return err
			}},
			{"fetch_warm + grpc_floor", func() (err error) { warm, floorR, err = e.warmAndFloor(ctx, ss); return err }},
			{"local_read", func() (err error) { local, err = e.local(ss); return err }},
			{"raw_seq_get + grpc_floor stream", func() (err error) {
				if seq, err = e.rawSeqGet(ctx); err != nil {
					return err
				}
				return e.floorStream(ctx, floorR)
			}},
			{fmt.Sprintf("replay + kafka_replay (x%d)", cfg.Rounds), func() (err error) { replay, kreplay, err = e.replays(ctx); return err }},
			{fmt.Sprintf("replay_%d (memory)", cfg.Readers), func() (err error) {
				if mem, err = e.memory(ctx, cfg.DaemonBin); err == nil {
					rep.Results = append(rep.Results, raw, cold, scold, kcold, coldAll, warm, local, floorR, seq, replay, kreplay, mem)
				}
				return err
			}},
		}...)
	}
	if cfg.runs("copy") {
		steps = append(steps, stepT{fmt.Sprintf("copy + raw_put (x%d)", cfg.Rounds), func() error {
			cp, raw, ratio, err := e.copyCase(ctx)
			if err == nil {
				rep.Results = append(rep.Results, cp, raw)
				rep.Series = append(rep.Series, ratio)
			}
			return err
		}})
	}
	if cfg.runs("readers") {
		steps = append(steps, stepT{fmt.Sprintf("readers_N (N = %v)", cfg.ReaderCounts), func() error {
			s, err := e.readersCase(ctx)
			rep.Series = append(rep.Series, s...)
			return err
		}})
	}
	if cfg.runs("plugin") {
		steps = append(steps, stepT{fmt.Sprintf("plugin (x%d)", cfg.Rounds), func() error {
			out, skip, err := e.pluginCase(ctx)
			if skip != "" {
				rep.PluginSkipped = skip
				e.logf("plugin: skipped: %s", skip)
			}
			rep.Results = append(rep.Results, out.results...)
			rep.Series = append(rep.Series, out.series...)
			return err
		}})
	}
	if cfg.runs("scale_partitions") {
		steps = append(steps, stepT{fmt.Sprintf("scale_partitions (%v)", cfg.Partitions), func() error {
			s, err := e.scalePartitions(ctx)
			rep.Series = append(rep.Series, s...)
			return err
		}})
	}
	if cfg.runs("scale_segments") {
		steps = append(steps, stepT{fmt.Sprintf("scale_segments (%v)", cfg.Copies), func() error {
			s, err := e.scaleSegments(ctx)
			rep.Series = append(rep.Series, s...)
			return err
		}})
	}
	if cfg.runs("codecs") {
		steps = append(steps, stepT{fmt.Sprintf("codecs (x%d)", cfg.Rounds), func() error {
			s, err := e.codecsCase(ctx)
			rep.Series = append(rep.Series, s...)
			return err
		}})
	}
	if cfg.runs("objects") {
		steps = append(steps, stepT{fmt.Sprintf("objects (x%d)", cfg.Rounds), func() error {
			s, err := e.objectsCase(ctx)
			rep.Series = append(rep.Series, s...)
			return err
		}})
	}
	for _, s := range steps {
		if err := step(s.name, s.f); err != nil {
			return nil, err
		}
	}
	for _, r := range rep.Results {
		r.finish()
	}
	return rep, nil
}
