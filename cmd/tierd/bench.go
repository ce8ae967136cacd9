package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tierd/tierd/cmd/tierd/internal/bench"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ba, code := benchConfig(args, stderr)
	if code >= 0 {
		return code
	}
	cfg, jsonPath, plotPath := ba.Config, &ba.jsonPath, &ba.plotPath
	if exe, err := os.Executable(); err == nil {
		cfg.DaemonBin = exe // the memory and readers cases measure "tierd run" children
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
		if err := rep.WriteGrowthPlot(bench.GrowthPlotPath(*plotPath)); err != nil {
			fmt.Fprintf(stderr, "tierd bench: %v\n", err)
			return 1
		}
	}
	return 0
}

// benchArgs is what "tierd bench"'s flags say.
type benchArgs struct {
	bench.Config
	jsonPath, plotPath string
}

// benchConfig parses "tierd bench"'s flags into a checked config. It
// returns the exit code to stop with (0 after -h, 2 for a bad flag,
// with the reason on stderr), or -1 to go on.
func benchConfig(args []string, stderr io.Writer) (benchArgs, int) {
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
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds of every case: times replay and kafka_replay each read the whole log, taking turns, and the copy, codecs, objects, plugin and growth cases' rounds (their ratios are medians over rounds; judge targets on several)")
	fs.Int64Var(&cfg.ChunkBytes, "chunk-bytes", cfg.ChunkBytes, "remote.fetch.chunk.bytes")
	fs.Int64Var(&cfg.CacheMemoryBytes, "cache-memory-bytes", cfg.CacheMemoryBytes, "remote.fetch.chunk.cache.memory.bytes")
	fs.Int64Var(&cfg.IndexCacheBytes, "index-cache-bytes", cfg.IndexCacheBytes, "remote.log.index.file.cache.total.size.bytes")
	fs.Int64Var(&cfg.PrefetchBytes, "prefetch-bytes", cfg.PrefetchBytes, "remote.fetch.prefetch.max.bytes")
	fs.IntVar(&cfg.MaxInflightGets, "max-inflight-gets", cfg.MaxInflightGets, "remote.fetch.max.inflight.gets")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the random offsets")
	fs.DurationVar(&cfg.StoreLatency, "store-latency", 0, "delay added before every GET's first byte (raw_get and tierd alike), e.g. 20ms to model S3")
	scale := fs.String("scale", bench.ScaleSmall, "sizes of the growth cases: small (5-50 partitions, 10-100 copies, 1-8 readers; minutes) or full (100-10,000 partitions, 1,000-100,000 copies, 1-64 readers; hours on today's code)")
	cases := fs.String("cases", strings.Join(bench.AllCases, ","), "comma-separated cases to run: "+strings.Join(bench.AllCases, ", "))
	partitions := fs.String("partitions", "", "scale_partitions sizes, comma-separated (default: from --scale)")
	copies := fs.String("copies", "", "scale_segments sizes, finished copies in one partition, comma-separated (default: from --scale)")
	readerCounts := fs.String("reader-counts", "", "readers_N numbers of readers, comma-separated (default: from --scale)")
	readerBytes := fs.Int64("reader-bytes", 0, "bytes each readers_N reader reads, whatever N (default: --reader-total-bytes split among the readers)")
	readerTotal := fs.Int64("reader-total-bytes", 0, "bytes the readers of one readers_N run read together, split evenly (default: from --scale, 32 MiB small, 4 GiB full)")
	readerPatterns := fs.String("reader-patterns", "seq,random,broker", "readers_N patterns: seq, random, broker (byte ranges as the broker's RSM plugin reads them)")
	scaleBuckets := fs.String("scale-buckets", "filesystem,minio", "buckets the scale cases run on: filesystem, minio")
	caseTimeout := fs.Duration("case-timeout", 0, "time one size of a scale case may take before it is reported as timed out (default: from --scale, 3m small, 30m full)")
	fs.Int64Var(&cfg.ReadersMemoryLimit, "readers-memory-limit", cfg.ReadersMemoryLimit, "memory_limit_bytes of readers_N's tierd run children: -2 the fetch budgets + 32 MiB, -1 none, 0 tierd's automatic rule, or bytes")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", "", "write Go profiles into this existing directory (go tool pprof): the bench process's CPU for each read-path step; for readers_N, each run's tierd child (CPU, block, mutex) and the bench's CPU")
	fs.IntVar(&cfg.ProfileSeconds, "profile-seconds", cfg.ProfileSeconds, "readers_N with --profile-dir: seconds each CPU profile runs from the readers' start")
	fs.StringVar(&cfg.PluginJars, "kafka-rsm-jars", cfg.PluginJars, "directory of the Kafka plugin's jars for the plugin cases (make kafka-rsm-driver; with the default and ./kafka-rsm/build.sh here, they are built when missing or older than their sources)")
	fs.StringVar(&cfg.ChildBucketType, "child-bucket-type", cfg.ChildBucketType, "bucket.type of the tierd run children (replay_N, readers_N, the plugin cases): s3 (aws-sdk-go-v2) or minio (minio-go)")
	fs.StringVar(&cfg.Java, "java", "", "java launcher of the plugin cases' JVM (default: java on PATH; none skips those cases)")
	fs.Int64Var(&cfg.ObjectsBytes, "objects-bytes", cfg.ObjectsBytes, "bytes of each data shape's partition in the objects case (16 MiB segments)")
	fs.DurationVar(&cfg.ObjectsStoreLatency, "objects-store-latency", cfg.ObjectsStoreLatency, "first-byte latency the objects case's cold-Fetch target is judged at (a second run of its cold Fetches over a store that waits this long before each GET; 0: judged on loopback)")
	objectsChunks := fs.String("objects-chunk-sizes", "", "chunk sizes the objects case stores the chunked forms at, bytes, comma-separated (default 262144,1048576,4194304)")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file")
	plotPath := fs.String("plot", "", "draw the latency percentiles to this .png or .svg file, and the growth cases' cost by size to the same name with -growth added (bench.png: bench-growth.png)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return benchArgs{}, 0
	} else if err != nil {
		return benchArgs{}, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tierd bench: unexpected arguments %q\n", fs.Args())
		return benchArgs{}, 2
	}
	if *maxBytes < 1 || *maxBytes > 1<<31-1 {
		fmt.Fprintf(stderr, "tierd bench: --max-bytes %d must be from 1 to 2147483647\n", *maxBytes)
		return benchArgs{}, 2
	}
	cfg.MaxBytes = int32(*maxBytes)
	if err := cfg.SetScale(*scale); err != nil {
		fmt.Fprintf(stderr, "tierd bench: --scale: %v\n", err)
		return benchArgs{}, 2
	}
	cfg.Cases, cfg.ScaleBuckets, cfg.ReaderPatterns = splitList(*cases), splitList(*scaleBuckets), splitList(*readerPatterns)
	if cfg.PluginJars == bench.DefaultConfig().PluginJars {
		if _, err := os.Stat(filepath.Join("kafka-rsm", "build.sh")); err == nil {
			cfg.PluginSource = "kafka-rsm" // in a checkout: build the jars when they are missing or stale
		}
	}
	for _, l := range []struct {
		flag, v string
		to      *[]int
	}{{"partitions", *partitions, &cfg.Partitions}, {"copies", *copies, &cfg.Copies}, {"reader-counts", *readerCounts, &cfg.ReaderCounts},
		{"objects-chunk-sizes", *objectsChunks, &cfg.ObjectsChunkSizes}} {
		if l.v == "" {
			continue
		}
		var err error
		if *l.to, err = intList(l.v); err != nil {
			fmt.Fprintf(stderr, "tierd bench: --%s: %v\n", l.flag, err)
			return benchArgs{}, 2
		}
	}
	if *readerBytes != 0 {
		cfg.ReaderBytes = *readerBytes
	}
	if *readerTotal != 0 {
		cfg.ReaderTotalBytes = *readerTotal
	}
	if *caseTimeout != 0 {
		cfg.CaseTimeout = *caseTimeout
	}
	if ext := strings.ToLower(filepath.Ext(*plotPath)); *plotPath != "" && ext != ".png" && ext != ".svg" {
		fmt.Fprintf(stderr, "tierd bench: --plot %s: the file name must end in .png or .svg\n", *plotPath)
		return benchArgs{}, 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "tierd bench: %v\n", err)
		return benchArgs{}, 2
	}
	return benchArgs{Config: cfg, jsonPath: *jsonPath, plotPath: *plotPath}, -1
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// intList parses a comma-separated list of whole numbers.
func intList(v string) ([]int, error) {
	var out []int
	for _, f := range splitList(v) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
