// Package bench is "tierd bench": remote-read latency and throughput of
// tierd measured side by side with the object store's and the transport's
// own, in one run, against one bucket.
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
//	kafka_fetch_cold
//	                the same reads as Kafka Fetch requests (one partition,
//	                partition_max_bytes = max_bytes) sent with franz-go to
//	                tierd's Kafka listener, caches emptied the same way
//	fetch_cold_all  a third of the offsets again, index cache emptied too
//	fetch_warm      Fetch of an offset right after a Fetch of it
//	local_read      the embedded segment log reading the local files
//	grpc_floor      an RPC of the same shape answering the same number of
//	                bytes from memory: the transport's floor
//	raw_seq_get     one GET of each whole .log, one after another
//	replay          one consumer reading the whole log through Fetch, with
//	                empty caches (MiB/s, GETs per MiB)
//	kafka_replay    the same read by a franz-go consumer (assign-style from
//	                the start, fetch max bytes = max_bytes) through the
//	                Kafka listener, every value checked
//	replay_N        N consumers at once, each reading the whole log from
//	                its own start, against a "tierd run" child process
//	                whose peak memory is recorded
//
// The Kafka listener serves a logview with no log dirs over the same
// in-process fetch server the gRPC cases use, so both protocols read the
// remote tier through the same chunk cache, prefetch and index cache; the
// targets compare them as ratios of the same run (kafka_replay MiB/s >=
// 0.9 x replay's, kafka_fetch_cold p50 <= 1.1 x fetch_cold's).
//
// The latency cases check every answer byte for byte against the local
// segment files (cold ones against the raw GET's bytes too); the replays
// check that answers follow on from each other and add up to the whole
// log, and kafka_replay that every offset comes once, in order, with the
// value written. A wrong answer fails the run.
//
// # JSON output (--json)
//
// One object keyed by case name; each value has count, p50_us, p99_us,
// p999_us (microseconds, from an HDR histogram of 3 significant digits)
// and mib_per_s; replay and kafka_replay add gets_per_mib (kafka_replay's
// latencies are its Fetch requests', franz-go's write to read), replay_N adds
// peak_anon_rss_mib (peak anonymous resident memory, sampled every 5 ms),
// peak_total_rss_mib (VmHWM, with the binary's file-backed pages) and
// limit_mib (the caches' budgets + 64 MiB).
package bench
