// Package logview joins tierd's two tiers into the one log per partition
// that the Kafka listener serves (it implements listener.Log): the remote
// tier through the remote read engine's Go read API (package remoteread:
// the same chunk cache, prefetch and index cache as the gRPC API, package
// fetch, serves from), the local tier through
// package locallog's read-only view of the Kafka log dirs.
//
// # Which partitions
//
// A partition is served when tierd has remote metadata for it (rlmm) or a
// live "<topic>-<partition>" directory in one of the log dirs (internal
// topics included; "-delete", "-future" and "-stray" directories are
// not). The log dirs are listed again at most every Config.RescanInterval,
// and at once when a read misses. A partition live in two log dirs is
// served from the one whose log reaches further.
//
// # Topic ids
//
// Metadata v10+ and Fetch v13+ name topics by id (KIP-516). A topic's id
// is, in order: the topic_id of a partition.metadata file, the topic id
// the remote copies were recorded under, or, when neither exists (logs
// written by brokers before 2.8 or by tierd's own segment log), an id
// derived from the name: the first 16 bytes of SHA-256("tierd-topic-id:" +
// name) with the version-4 and variant bits of a random Uuid set, so it
// never collides with the all-zero id and stays the same across restarts.
// Ids are unique: when several topics claim the same recorded id (a
// partition directory copied under another name with its
// partition.metadata), each of them is served under its derived id, with
// a warning, so that a fetch by id never reads another topic.
//
// # Incarnations
//
// The remote copies and the local directory are joined only when they
// belong to the same incarnation of the topic: when both record a topic
// id and the ids differ (the topic was deleted and created again under the
// same name, and the old copies wait for their deletion), the partition is
// served from the local log alone, with a warning. The local id is read
// again at most every Config.CacheTTL.
//
// # Offsets
//
// The log start offset is the remote tier's (rlmm's, which follows the
// broker's log-start-offset-checkpoint and retention) when something is
// tiered, else the oldest local segment's base offset or, when larger, the
// log dir's log-start-offset-checkpoint entry for the partition
// (delete-records or retention inside the oldest segment; an entry past
// the high watermark is ignored with a warning). The high watermark
// is the end locallog serves (the broker's high watermark from
// replication-offset-checkpoint in a broker-owned log dir, else the end of
// the last whole batch), or the highest tiered offset + 1 when no local
// data reaches further. The last stable offset is locallog's (open
// transactions in the local log), never below the log start offset nor
// above the high watermark (UnifiedLog.maybeIncrementFirstUnstableOffset).
//
// # Timestamps
//
// OffsetForTimestamp and MaxTimestamp look at the records from the log
// start offset to the high watermark, the tiered log first, and answer
// not found when the record they find is at or past the isolation level's
// end, as Kafka does (ReplicaManager.fetchOffset's lastFetchableOffset):
// under read_committed, a maximum inside an open transaction is not
// answered with a smaller one below it.
//
// # Reads
//
// An offset at or above the local log start offset reads the local
// segment; one below it, or one whose segment local retention deleted
// under the reader, reads the remote copy; a remote read that finds only
// offsets compacted away at the end of the tiered log continues in the
// local log; a local segment found corrupt reads the remote copy of the
// offsets when one is finished (warned once per partition). Offsets that
// neither tier holds (a segment deleted locally before it was copied) and
// corrupt local offsets without a copy are ErrDataLoss, never skipped. With
// read_committed the aborted transactions come from the transaction
// indexes of the segments at and after the read's first offset, remote and
// local, as Kafka collects them (LocalLog.collectAbortedTransactions: the
// index entry sits in the segment of the abort marker, which may come
// after the read's range).
package logview
