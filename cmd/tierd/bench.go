package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tierd/tierd/bench"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := bench.DefaultConfig()
	fs.StringVar(&cfg.S3Endpoint, "s3-endpoint", "", "S3/MinIO URL (e.g. http://127.0.0.1:9000; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the AWS chain); default: start MinIO on 127.0.0.1")
	fs.StringVar(&cfg.Bucket, "s3-bucket", cfg.Bucket, "bucket, created when missing; the run writes only under <prefix>/tierd-bench-<random>/ and deletes exactly the objects it wrote there at the end")
	fs.StringVar(&cfg.Prefix, "s3-prefix", "", "key prefix the run's own prefix goes under (default: the bucket root)")
	fs.StringVar(&cfg.Region, "s3-region", cfg.Region, "bucket region")
	fs.StringVar(&cfg.Dir, "dir", "", "working directory (log, metadata, MinIO data); default: a temporary one, removed at the end")
	fs.Int64Var(&cfg.SegmentBytes, "segment-bytes", cfg.SegmentBytes, "segment.bytes of the written partition")
	fs.Int64Var(&cfg.TotalBytes, "total-bytes", cfg.TotalBytes, "bytes in the partition")
	fs.IntVar(&cfg.RecordBytes, "record-bytes", cfg.RecordBytes, "value bytes per record (16 records a batch, uncompressed)")
	maxBytes := fs.Int("max-bytes", int(cfg.MaxBytes), "max_bytes of every Fetch (max.partition.fetch.bytes)")
	fs.IntVar(&cfg.Count, "count", cfg.Count, "random offsets read by the latency cases")
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "concurrent consumers in the memory case (replay_N)")
	fs.IntVar(&cfg.Readers, "concurrency", cfg.Readers, "the same as --readers")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "times replay and kafka_replay each read the whole log, taking turns")
	fs.Int64Var(&cfg.ChunkBytes, "chunk-bytes", cfg.ChunkBytes, "remote.fetch.chunk.bytes")
	fs.Int64Var(&cfg.CacheMemoryBytes, "cache-memory-bytes", cfg.CacheMemoryBytes, "remote.fetch.chunk.cache.memory.bytes")
	fs.Int64Var(&cfg.IndexCacheBytes, "index-cache-bytes", cfg.IndexCacheBytes, "remote.log.index.file.cache.total.size.bytes")
	fs.Int64Var(&cfg.PrefetchBytes, "prefetch-bytes", cfg.PrefetchBytes, "remote.fetch.prefetch.max.bytes")
	fs.IntVar(&cfg.MaxInflightGets, "max-inflight-gets", cfg.MaxInflightGets, "remote.fetch.max.inflight.gets")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the random offsets")
	fs.DurationVar(&cfg.StoreLatency, "store-latency", 0, "delay added before every GET's first byte (raw_get and tierd alike), e.g. 20ms to model S3")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file")
	plotPath := fs.String("plot", "", "draw the latency percentiles to this .png or .svg file")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tierd bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *maxBytes < 1 || *maxBytes > 1<<31-1 {
		fmt.Fprintf(stderr, "tierd bench: --max-bytes %d must be from 1 to 2147483647\n", *maxBytes)
		return 2
	}
	cfg.MaxBytes = int32(*maxBytes)
	if ext := strings.ToLower(filepath.Ext(*plotPath)); *plotPath != "" && ext != ".png" && ext != ".svg" {
		fmt.Fprintf(stderr, "tierd bench: --plot %s: the file name must end in .png or .svg\n", *plotPath)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "tierd bench: %v\n", err)
		return 2
	}
	if exe, err := os.Executable(); err == nil {
		cfg.DaemonBin = exe // the memory case measures a "tierd run" child
	}
	rep, err := bench.Run(ctx, cfg, stderr)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "tierd bench: interrupted")
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "tierd bench: %v\n", err)
		return 1
	}
	rep.WriteTable(stdout)
	if *jsonPath != "" {
		if err := rep.WriteJSON(*jsonPath); err != nil {
			fmt.Fprintf(stderr, "tierd bench: %v\n", err)
			return 1
		}
	}
	if *plotPath != "" {
		if err := rep.WritePlot(*plotPath); err != nil {
			fmt.Fprintf(stderr, "tierd bench: %v\n", err)
			return 1
		}
	}
	return 0
}
