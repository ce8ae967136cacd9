package bench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/rsm/chunked"
)

// Config sizes a bench run. Defaults are in DefaultConfig; they finish in
// well under a minute on a 2-core machine with MinIO on loopback.
type Config struct {
	// S3Endpoint is the S3/MinIO URL (e.g. http://127.0.0.1:9000); ""
	// starts a MinIO server on 127.0.0.1 for the run. Default "".
	S3Endpoint string
	// Bucket is the bucket, created when missing. Default "tierd-bench".
	Bucket string
	// Region is the bucket's region. Default "us-east-1".
	Region string
	// Prefix is the key prefix the run's own prefix goes under: the run
	// writes only under "<Prefix>/tierd-bench-<random>/", refuses to start
	// when that holds anything, and at the end deletes exactly the
	// objects it uploaded there. No leading or trailing '/'. Default ""
	// (the bucket root).
	Prefix string
	// Dir holds the local log, the metadata and MinIO's data; it must be
	// new or empty. "" is a temporary directory removed at the end.
	// Default "".
	Dir string
	// SegmentBytes is segment.bytes of the written partition, bytes.
	// Default 33554432 (32 MiB).
	SegmentBytes int64
	// TotalBytes is how much the partition holds, bytes. Default
	// 268435456 (256 MiB).
	TotalBytes int64
	// RecordBytes is the value size of each record, bytes; records go 16
	// to a batch, uncompressed. Default 1024.
	RecordBytes int
	// MaxBytes is the max_bytes of every Fetch (Kafka's
	// max.partition.fetch.bytes), bytes, at most 256 MiB. Default 1048576.
	MaxBytes int32
	// Count is how many random offsets the latency cases read. Default 300.
	Count int
	// Readers is how many concurrent consumers the memory case runs.
	// Default 8.
	Readers int
	// Rounds is how many times replay and kafka_replay each read the whole
	// log, taking turns (which goes first alternates), so that their ratio
	// is measured over the same stretch of time on a shared machine; their
	// MiB/s are over all rounds. Default 3.
	Rounds int
	// ChunkBytes, CacheMemoryBytes, IndexCacheBytes, PrefetchBytes and
	// MaxInflightGets configure tierd's fetch server as in tierd.yaml.
	// Defaults: fetch's chunk size and prefetch depth (16 MiB, 64 MiB, so
	// the bench measures what tierd runs with), 128 MiB of memory (half
	// the data, so the cache must evict), 8 MiB of index cache and 8 GETs.
	ChunkBytes, CacheMemoryBytes, IndexCacheBytes, PrefetchBytes int64
	MaxInflightGets                                              int
	// Seed picks the random offsets. Default 1.
	Seed uint64
	// StoreLatency is added before every GET's first byte, to model an
	// object store farther away than loopback (S3's first-byte latency is
	// tens of ms): in the process (raw_get and tierd alike) by the bucket
	// wrapper, and for the "tierd run" children (replay_N, readers_N) by
	// a proxy in front of the store that holds every GET. The scale cases
	// do not add it. Default 0.
	StoreLatency time.Duration
	// DaemonBin is a tierd binary; the memory and readers cases then run
	// against "tierd run" child processes, so that their peak memory is
	// tierd's alone, and scale_segments times "tierd segments" with it.
	// "" (default) uses the in-process server and skips "tierd segments".
	DaemonBin string
	// ReadersMemoryLimit is the memory_limit_bytes of readers_N's "tierd
	// run" children: -2 the fetch caches' budgets + 32 MiB (what the
	// memory case gives its children), -1 none, 0 tierd's automatic rule,
	// or bytes. Default 0: with the tighter limit, 64 readers held more
	// than it (answers being sent, gRPC buffers, parts not yet collected)
	// and tierd spent about 2.5 times the CPU per byte in the collector
	// and in faulting back pages the runtime had returned.
	ReadersMemoryLimit int64
	// ProfileDir, when set, receives Go profiles (the directory must
	// exist). The read path: a CPU profile of the bench process (the
	// clients and the in-process servers) for each step: raw_get +
	// fetch_cold + kafka_fetch_cold (cold.pprof, and an execution trace,
	// cold.trace, for where the cold fetches wait), fetch_warm + grpc_floor
	// (warm.pprof), raw_seq_get.pprof, grpc_floor_stream.pprof, and
	// replay-<round>.pprof and kafka_replay-<round>.pprof; copy-<round>.pprof
	// and raw_put-<round>.pprof. readers_N
	// (readprof.go): the "tierd run" child's CPU profile (it runs with
	// http.pprof on) and the bench process's, over ProfileSeconds from
	// the readers' start, and the child's block and mutex profiles after
	// the run, as readers_<N>_<pattern>_r<round>.*.pprof; a run shorter
	// than ProfileSeconds waits for its profiles. scale_segments: the
	// bench process's CPU profile of each retention pass, as
	// scale_segments_<bucket>_<copies>_retention.pprof (the last round's).
	// Default "" (none).
	ProfileDir string
	// ProfileSeconds is how long each CPU profile of readers_N runs,
	// seconds. Default 15.
	ProfileSeconds int

	// ChildBucketType is bucket.type of the "tierd run" children
	// (replay_N, readers_N, the plugin case): "s3" (aws-sdk-go-v2, the
	// bench's own client) or "minio" (minio-go). Default "s3".
	ChildBucketType string
	// Java is the java launcher of the plugin case's JVM; "" looks for
	// java on PATH (without one the case is skipped, with a note).
	// Default "".
	Java string
	// PluginJars is the directory holding the plugin's jars
	// (tierd-kafka-rsm.jar, tierd-kafka-rsm-driver.jar and
	// kafka-rsm-api-stubs.jar: make kafka-rsm-driver); without them the
	// plugin case is skipped, with a note. Default "bin".
	PluginJars string
	// PluginSource, when set, is the plugin's source dir (kafka-rsm, with
	// build.sh, which writes the jars into ../bin from it: PluginJars
	// must be that dir): when javac is on PATH and a jar is missing or
	// older than a file there, the plugin case builds them first.
	// Default "" (tierd bench sets kafka-rsm when ./kafka-rsm/build.sh
	// exists and --kafka-rsm-jars is its default).
	PluginSource string

	// Cases are the cases to run, from AllCases: "read" (the read path's
	// cases, raw_get to replay_N), "copy", "readers", "plugin" (the
	// broker's path through the Java plugin, plugin.go),
	// "scale_partitions", "scale_segments", "codecs" (codecs.go),
	// "objects" (objects.go). Default all of them.
	Cases []string
	// Partitions are scale_partitions' sizes, partitions of 3 rolled
	// segments each, rising. Default [5, 50] (ScaleSmall); ScaleFull
	// sets [100, 1000, 10000].
	Partitions []int
	// Copies are scale_segments' sizes, finished copies in one
	// partition, rising. Default [10, 100]; ScaleFull sets [1000,
	// 10000, 100000].
	Copies []int
	// ReaderCounts are readers_N's numbers of concurrent readers, rising.
	// Default [1, 8]; ScaleFull sets [1, 8, 32, 64].
	ReaderCounts []int
	// ReaderPatterns are readers_N's patterns, from "seq", "random" and
	// "broker" (byte ranges as a broker's RemoteStorageManager plugin
	// reads them, brokerreaders.go). Default all three.
	ReaderPatterns []string
	// ReaderTotalBytes is how much the N readers of one readers_N run
	// read together, bytes, split evenly: each reads ReaderTotalBytes / N.
	// Every N then does the same work (and as many Fetches, so the p99s
	// rest on as many samples), and the fewer the readers, the longer
	// each reads past the prefetch depth, which bytes fetched per byte
	// served counts too (see Report.WriteTable). Default 32 MiB (1
	// reader: 32 MiB, 8: 4 MiB each); ScaleFull sets 4 GiB (1: 4 GiB, 8:
	// 512 MiB, 32: 128 MiB, 64: 64 MiB each).
	ReaderTotalBytes int64
	// ReaderBytes, when above 0, is how much each reader reads instead,
	// bytes, whatever N. Default 0.
	ReaderBytes int64
	// ScaleBuckets are the buckets scale_partitions and scale_segments
	// run on: "filesystem" (a directory, the embedded default) and
	// "minio" (the bench's S3 bucket, under the run's prefix). Default
	// both.
	ScaleBuckets []string
	// CaseTimeout bounds one size of a scale case (one bucket, one
	// round); a size that takes longer is reported as "timed out after
	// CaseTimeout" and the larger sizes of that bucket are skipped.
	// Default 3m; ScaleFull sets 30m.
	CaseTimeout time.Duration

	// ObjectsBytes is how much each data shape's partition of the
	// objects case holds, bytes, in 16 MiB segments. Default 32 MiB.
	ObjectsBytes int64
	// ObjectsChunkSizes are the chunk sizes (objects' chunk.size, bytes)
	// the objects case stores the chunked forms at. Default 256 KiB,
	// 1 MiB and 4 MiB.
	ObjectsChunkSizes []int
	// ObjectsStoreLatency is the first-byte latency the objects case's
	// cold-Fetch target is judged at: with StoreLatency 0, the cold
	// Fetches of the plain form and of the chunked forms at the default
	// chunk size are made a second time over a store that waits this
	// long before each GET (slowBucket), beside the loopback ones.
	// Default 20ms (S3's order); 0 makes no such run (the target is then
	// judged on loopback).
	ObjectsStoreLatency time.Duration

	runID string // names the run's prefix; "" = random (tests set it)
}

// AllCases are the case groups a run can select (Config.Cases).
var AllCases = []string{"read", "copy", "readers", "plugin", "scale_partitions", "scale_segments", "codecs", "objects"}

// Scale names a set of sizes for the growth cases.
const (
	// ScaleSmall is the default: each growth case finishes in seconds to
	// a minute, one tenfold step each.
	ScaleSmall = "small"
	// ScaleFull is the full sizes: 100 to 10,000 partitions, 1,000 to
	// 100,000 copies, 1 to 64 readers. On a 2-core machine it takes hours
	// before the growth is made linear.
	ScaleFull = "full"
)

// SetScale sets the growth cases' sizes and CaseTimeout to those of the
// named scale. Errors: an unknown name.
func (c *Config) SetScale(name string) error {
	switch name {
	case ScaleSmall:
		c.Partitions, c.Copies, c.ReaderCounts, c.ReaderTotalBytes, c.CaseTimeout = []int{5, 50}, []int{10, 100}, []int{1, 8}, 32<<20, 3*time.Minute
	case ScaleFull:
		c.Partitions, c.Copies, c.ReaderCounts, c.ReaderTotalBytes, c.CaseTimeout = []int{100, 1000, 10000}, []int{1000, 10000, 100000}, []int{1, 8, 32, 64}, 4<<30, 30*time.Minute
	default:
		return fmt.Errorf("scale %q: want %s or %s", name, ScaleSmall, ScaleFull)
	}
	return nil
}

// readerBytes is how much each of n readers of readers_N reads, bytes.
func (c Config) readerBytes(n int) int64 {
	if c.ReaderBytes > 0 {
		return c.ReaderBytes
	}
	return max(1, c.ReaderTotalBytes/int64(n))
}

// runs reports whether the case group name is selected.
func (c Config) runs(name string) bool {
	for _, n := range c.Cases {
		if n == name {
			return true
		}
	}
	return false
}

// runPrefix returns the run's own key prefix: "tierd-bench-<id>" under
// c.Prefix, with a random id unless a test set one.
func (c Config) runPrefix() (string, error) {
	id := c.runID
	if id == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id = hex.EncodeToString(b[:])
	}
	return path.Join(c.Prefix, "tierd-bench-"+id), nil
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	c := Config{Bucket: "tierd-bench", Region: "us-east-1", SegmentBytes: 32 << 20, TotalBytes: 256 << 20,
		RecordBytes: 1024, MaxBytes: 1 << 20, Count: 300, Readers: 8, Rounds: 3, ChunkBytes: grpcapi.DefaultConfig().Cache.ChunkBytes,
		CacheMemoryBytes: 128 << 20, IndexCacheBytes: 8 << 20, PrefetchBytes: grpcapi.DefaultConfig().PrefetchBytes, MaxInflightGets: 8, Seed: 1, ProfileSeconds: 15, PluginJars: "bin", ChildBucketType: "s3",
		Cases: append([]string(nil), AllCases...), ReaderPatterns: []string{"seq", "random", "broker"}, ScaleBuckets: []string{"filesystem", "minio"},
		ObjectsBytes: 32 << 20, ObjectsChunkSizes: []int{256 << 10, 1 << 20, 4 << 20},
		ObjectsStoreLatency: 20 * time.Millisecond}
	c.SetScale(ScaleSmall)
	return c
}

// FetchConfig is the fetch server configuration the run gives tierd:
// the defaults with the cache, prefetch and GET settings of c.
func (c Config) FetchConfig() grpcapi.Config {
	f := grpcapi.DefaultConfig()
	f.Listen = "127.0.0.1:0"
	f.Cache.ChunkBytes, f.Cache.MemoryBytes, f.Cache.MaxInflightGets = c.ChunkBytes, c.CacheMemoryBytes, c.MaxInflightGets
	f.IndexCacheBytes, f.PrefetchBytes = c.IndexCacheBytes, c.PrefetchBytes
	f.FetchMaxBytes = max(f.FetchMaxBytes, c.MaxBytes)
	// A read waits for its GET however long the store takes: the bench
	// measures that wait, where the default 500 ms would answer
	// UNAVAILABLE (retry) on a slow or loaded store and end the run.
	f.MaxWaitMs = 25000 // below request_timeout (30 s)
	return f
}

// Validate reports every problem at once, the fetch server's settings
// included, before anything starts.
func (c Config) Validate() error {
	var errs []error
	if c.runs("objects") {
		if c.ObjectsBytes < objectsSegmentBytes {
			errs = append(errs, fmt.Errorf("objects bytes %d must be at least one 16 MiB segment", c.ObjectsBytes))
		}
		for _, cb := range c.ObjectsChunkSizes {
			if cb < chunked.MinChunkBytes || cb > chunked.MaxChunkBytes {
				errs = append(errs, fmt.Errorf("objects chunk size %d must be %d to %d bytes", cb, chunked.MinChunkBytes, chunked.MaxChunkBytes))
			}
		}
	}
	if c.SegmentBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("segment bytes %d must be at least 1 MiB", c.SegmentBytes))
	}
	if c.TotalBytes < 2*c.SegmentBytes {
		errs = append(errs, fmt.Errorf("total bytes %d must be at least two segments (%d)", c.TotalBytes, 2*c.SegmentBytes))
	}
	if c.RecordBytes < 1 || c.RecordBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("record bytes %d must be from 1 to 1048576", c.RecordBytes))
	}
	if c.MaxBytes < 1 || c.MaxBytes > 256<<20 {
		errs = append(errs, fmt.Errorf("max bytes %d must be from 1 to 268435456", c.MaxBytes))
	}
	if c.Count < 1 {
		errs = append(errs, fmt.Errorf("count %d must be positive", c.Count))
	}
	if c.Readers < 1 {
		errs = append(errs, fmt.Errorf("readers %d must be positive", c.Readers))
	}
	if c.Rounds < 1 {
		errs = append(errs, fmt.Errorf("rounds %d must be positive", c.Rounds))
	}
	if c.StoreLatency < 0 {
		errs = append(errs, fmt.Errorf("store latency %s must not be negative", c.StoreLatency))
	}
	if c.ObjectsStoreLatency < 0 {
		errs = append(errs, fmt.Errorf("objects store latency %s must not be negative", c.ObjectsStoreLatency))
	}
	if c.Bucket == "" {
		errs = append(errs, errors.New("bucket is required"))
	}
	if strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") {
		errs = append(errs, fmt.Errorf("prefix %q must not start or end with '/'", c.Prefix))
	}
	for _, n := range c.Cases {
		known := false
		for _, a := range AllCases {
			known = known || n == a
		}
		if !known {
			errs = append(errs, fmt.Errorf("case %q: want some of %s", n, strings.Join(AllCases, ", ")))
		}
	}
	if len(c.Cases) == 0 {
		errs = append(errs, fmt.Errorf("no cases: want some of %s", strings.Join(AllCases, ", ")))
	}
	for _, b := range c.ScaleBuckets {
		if b != "filesystem" && b != "minio" {
			errs = append(errs, fmt.Errorf("scale bucket %q: want filesystem or minio", b))
		}
	}
	for _, sz := range []struct {
		name string
		v    []int
	}{{"partitions", c.Partitions}, {"copies", c.Copies}, {"reader counts", c.ReaderCounts}} {
		for i, v := range sz.v {
			if v < 1 || (i > 0 && v <= sz.v[i-1]) {
				errs = append(errs, fmt.Errorf("%s %v must be positive and rising", sz.name, sz.v))
				break
			}
		}
	}
	for _, v := range c.Copies {
		if v < 2 {
			errs = append(errs, fmt.Errorf("copies %v: at least 2 (retention deletes half)", c.Copies))
			break
		}
	}
	for _, p := range c.ReaderPatterns {
		if p != "seq" && p != "random" && p != "broker" {
			errs = append(errs, fmt.Errorf("reader pattern %q: want seq, random or broker", p))
		}
	}
	if len(c.ReaderPatterns) == 0 {
		errs = append(errs, errors.New("no reader patterns: want some of seq, random, broker"))
	}
	if c.ChildBucketType != "" && c.ChildBucketType != "s3" && c.ChildBucketType != "minio" {
		errs = append(errs, fmt.Errorf("child bucket type %q: want s3 or minio", c.ChildBucketType))
	}
	if c.ReadersMemoryLimit < -2 {
		errs = append(errs, fmt.Errorf("readers memory limit %d: want -2, -1, 0 or bytes", c.ReadersMemoryLimit))
	}
	if c.ProfileSeconds < 1 {
		errs = append(errs, fmt.Errorf("profile seconds %d must be positive", c.ProfileSeconds))
	}
	if c.ReaderBytes < 0 {
		errs = append(errs, fmt.Errorf("reader bytes %d must not be negative", c.ReaderBytes))
	}
	if c.ReaderBytes == 0 && c.ReaderTotalBytes < 1 {
		errs = append(errs, fmt.Errorf("reader total bytes %d must be positive", c.ReaderTotalBytes))
	}
	if c.CaseTimeout <= 0 {
		errs = append(errs, fmt.Errorf("case timeout %s must be positive", c.CaseTimeout))
	}
	if err := c.FetchConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
