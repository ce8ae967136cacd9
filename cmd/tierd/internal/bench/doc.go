// Package bench is "tierd bench": remote-read latency and throughput of
// tierd measured side by side with the object store's and the transport's
// own, in one run, against one bucket; and how tierd's costs grow with
// the number of partitions, copies and readers.
//
// # Cases
//
// A partition of TotalBytes (records of random bytes, 16 to a batch) is
// written with the embedded segment log and tiered by the copier. Then,
// over Count random offsets (the same offsets for every case):
//
//	raw_get         one ranged GET of exactly the bytes a Fetch answers,
//	                with tierd's own bucket client: the floor of a cold read
//	fetch_cold      Fetch over gRPC with the chunk cache emptied before each
//	                (remote indexes stay cached, as for a partition in use)
//	fetch_cold_stream
//	                the same reads through tierd's own client, which uses
//	                FetchStream (batches sent as the GET body arrives)
//	kafka_fetch_cold
//	                the same reads as Kafka Fetch requests (one partition,
//	                partition_max_bytes = max_bytes) sent with franz-go to
//	                tierd's Kafka listener, caches emptied the same way
//	fetch_cold_all  a third of the offsets again, index cache emptied too
//	fetch_warm      Fetch of an offset right after a Fetch of it
//	local_read      the embedded segment log reading the local files
//	grpc_floor      an RPC of the same shape answering the same number of
//	                bytes from memory: the transport's floor (taking turns
//	                with fetch_warm per offset); its CPU per GiB is
//	                measured over a separate stream of the log's size
//	raw_seq_get     one GET of each whole .log, one after another
//	replay          one consumer reading the whole log through Fetch, with
//	                empty caches (MiB/s, GETs per MiB)
//	kafka_replay    the same read by a franz-go consumer (assign-style from
//	                the start, fetch max bytes = max_bytes) through the
//	                Kafka listener, every value checked
//	replay_N        N consumers at once, each reading the whole log from
//	                its own start, against a "tierd run" child process
//	                whose peak memory is recorded
//	copy, raw_put   the copier tiering the partition (timed in setup)
//	                against the same files uploaded with the same bucket
//	                client, MiB/s of .log bytes
//
// The plugin cases (plugin.go, "plugin" in Config.Cases) measure the
// broker's path: the Kafka plugin in a JVM (kafka-rsm's PluginBench)
// calling a "tierd run" child that serves the RSM endpoint, beside GETs
// and PUTs of presigned URLs made straight to the store from the same JVM:
//
//	plugin_copy, jvm_raw_put
//	                copyLogSegmentData by path against PUTs of the same
//	                files, A B B A per round
//	plugin_fetch_cold, plugin_fetch_warm, jvm_raw_get
//	                fetchLogSegment of max_bytes from a batch start, the
//	                first read of its chunk of a new copy, then again from
//	                tierd's cache, against a ranged GET of the same bytes
//	plugin_readers  N broker readers through the plugin against a fresh
//	                child for each N
//
// with CPU seconds per GiB of the JVM, the child and MinIO (their
// threads' schedstat); they are skipped, with Report.PluginSkipped saying
// why, without java or the plugin's jars.
//
// replay, grpc_floor and raw_seq_get also report CPU seconds per GiB
// moved, of the bench process (clients and in-process servers, from
// getrusage) and of the MinIO process the bench started (from
// /proc/<pid>/stat), separately.
//
// # Growth cases
//
// Each runs at every size of its list, Rounds times, and reports each
// measure per size (median and range over rounds) and, for the scale
// cases, its growth per tenfold of the size:
//
//	readers_N         N = ReaderCounts concurrent cold readers against a
//	                  fresh "tierd run" child, sequential (each from its
//	                  own start) or at random offsets, together reading
//	                  ReaderTotalBytes: aggregate MiB/s, p50, p99 and mean
//	                  of a Fetch, bytes tierd fetched from the store per
//	                  byte served (its tierd_fetch_*_bytes_total) and the
//	                  prefetched bytes left unread, peak anonymous RSS,
//	                  CPU seconds per GiB of tierd, the bench and MinIO;
//	                  Go profiles of each run with ProfileDir. The
//	                  "broker" pattern reads as a broker's
//	                  RemoteStorageManager plugin does, by byte ranges of
//	                  each copy's .log (remoteread.Engine.WriteLogRange,
//	                  against a fresh read engine in the bench process: no RSS or
//	                  tierd CPU of its own; brokerreaders.go). Bytes
//	                  fetched per byte served is a target (<= 1.2) at 8
//	                  readers, or the size nearest it, for the seq and
//	                  broker patterns, and a note at the other sizes
//	scale_partitions  Partitions partitions of 3 rolled one-batch segments
//	                  with Kafka's checkpoint files, on the filesystem
//	                  bucket and on MinIO: CPU seconds (bench process +
//	                  MinIO) of the copier's first pass, of a restart's
//	                  first pass (five restarts, each a new store handle
//	                  and copier after a collection: their median, and
//	                  the first alone) and of an idle pass; the idle pass's
//	                  bucket requests (calls counted by a bucket wrapper)
//	                  and synced metadata writes (syncs of Pebble's files,
//	                  counted by a vfs wrapper: rlmm has no counter of
//	                  them); anonymous RSS; Pebble's size
//	scale_segments    Copies finished copies in one partition (seeded:
//	                  the objects through rsm.Manager.CopySegment and the
//	                  rows through the store's COPY_SEGMENT_STARTED and
//	                  FINISHED writes, as the copier makes them, up to 16
//	                  uploads at a time, then one copier pass over them;
//	                  the local files are the active segment only, as
//	                  after local retention), on both buckets: Fetch p50 at 50 random
//	                  offsets cached and right after a metadata write to
//	                  another partition (taking turns), "tierd segments"
//	                  time, and a retention pass deleting the older half
//
// The codecs case writes the same records (keys "key-N", 5000-byte
// values, 16 to a batch) into one segment of the embedded log under each
// compression.type (none, gzip, snappy, lz4, zstd), for two value shapes:
// "padded" (a label padded with one repeated character, the reference
// run's records) and "text" (English-like text). It reports,
// as series "codecs/<shape>/<codec>", the segment's size on disk
// (segment_bytes), and the CPU seconds to write it (write_cpu_s) and to
// read and decode every record (read_cpu_s); its target checks the
// target order zstd < gzip < lz4 < none on the padded shape, and a
// second, informational line the same order on the text shape.
//
// A size of a scale case that takes longer than CaseTimeout is reported
// as "timed out after CaseTimeout" and the larger sizes of that bucket
// are skipped; the run goes on.
// The Kafka listener serves a logview with no log dirs over the same
// in-process fetch server the gRPC cases use, so both protocols read the
// remote tier through the same chunk cache, prefetch and index cache; the
// targets compare them as ratios of the same run (kafka_replay MiB/s >=
// 0.9 x replay's, kafka_fetch_cold p50 <= 1.1 x fetch_cold's).
//
// The latency cases, the replays and readers_N check every answer byte
// for byte against the local segment files (cold ones against the raw
// GET's bytes too), and kafka_replay that every offset comes once, in
// order, with the value written. A wrong answer fails the run.
//
// # JSON output (--json)
//
// One object keyed by case name; each value has count, p50_us, p99_us,
// p999_us (microseconds, from an HDR histogram of 3 significant digits)
// and mib_per_s; replay and kafka_replay add gets_per_mib (kafka_replay's
// latencies are its Fetch requests', franz-go's write to read), replay_N adds
// peak_anon_rss_mib (peak anonymous resident memory, sampled every 5 ms),
// peak_total_rss_mib (VmHWM, with the binary's file-backed pages) and
// limit_mib (the caches' budgets + 64 MiB); replay, grpc_floor and
// raw_seq_get add cpu_s_per_gib_proc and cpu_s_per_gib_store, fetch_warm
// adds gets_while_timed (GETs tierd made while its samples were timed; 0
// when all were cached, else its target is not judged), the plugin cases
// cpu_s_per_gib_by_process ({"jvm", "tierd", "minio"}), and
// "plugin_skipped" holds why they did not run, when they did not. Each
// growth measure is keyed "case/variant metric" (for example
// "scale_partitions/minio idle_pass_cpu_s") with sizes, values (one row
// per round, null where not measured) and timed_out (per size, when one
// did).
package bench
