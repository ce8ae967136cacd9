// Package seglog is an embeddable Kafka-format segment log: one partition
// directory, "<topic>-<partition>", written and read the way a broker does,
// so that tierd (and Kafka's own tools) can work on it.
//
// # Layout
//
// See package internal/kafkalog for file naming. The log holds segments
// ordered by base offset; the last is the active segment, the only one
// appended to. Each segment is a .log of v2 record batches, a sparse .index
// (last offset of a batch -> its byte position) and a sparse .timeindex
// (max timestamp so far -> offset). The active segment's indexes are
// preallocated to segment.index.bytes and trimmed when it rolls or the log
// closes. leader-epoch-checkpoint records when the configured leader epoch
// began.
//
// # Rules (Kafka LogSegment / UnifiedLog)
//
//   - Append writes one batch; the active segment rolls first when the batch
//     would take it past segment.bytes, when the batch's max timestamp is more
//     than segment.ms after the segment's first batch timestamp (creation time
//     when there is none), when an index is full, or when an offset would not
//     fit the index's int32 relative offset. An empty segment never rolls.
//   - An index entry is added for a batch when more than index.interval.bytes
//     were appended since the previous entry; the time index then records the
//     max timestamp so far, and once more when the segment rolls.
//   - Open recovers: rolled segments keep sane indexes (untrimmed padding is
//     trimmed, anything else is rebuilt from the log); the active segment is
//     scanned with CRC checks, an invalid or torn tail is cut off and kept in
//     "<base>.log.<position>.broken", and its indexes are rebuilt. Stray
//     ".tmp" files, ".deleted" files and indexes without a .log are removed.
//   - Read serves whole batches from the batch whose last offset reaches the
//     requested offset; the base offset in a file name is a lower bound, not
//     the first offset, and offsets may have gaps.
//
// # Log cleaner (Kafka LogCleaner, LogCleanerManager, LocalLog.replaceSegments)
//
// With cleanup.policy compact or compact,delete, Clean runs one cleaning
// pass and RunCleaner runs one per tick; with delete it does nothing.
// seglog applies no retention for the delete part of compact,delete:
// tierd's copier does, as it does for delete topics.
//
//   - Cleanable range: from the log start offset to the first uncleanable
//     offset, the lowest of the active segment's base offset, the base
//     offset of the segment holding the first offset of an open
//     transaction (Kafka stops at the last stable offset itself; seglog
//     stops at its segment; open transactions are found in the log
//     itself, so one left open when the log was last closed still counts,
//     and since seglog cannot end it after a reopen it holds the cleaner
//     back for good), and the base offset of the first dirty
//     segment whose max timestamp is within min.compaction.lag.ms of now.
//     The active segment is never cleaned.
//   - Dirty range: from the first dirty offset, the partition's entry in
//     cleaner-offset-checkpoint (the log start offset when it has none or
//     it lies outside the log), to the first uncleanable offset. A pass
//     runs when the dirty range's bytes are more than
//     min.cleanable.dirty.ratio of the cleanable range's bytes, or when a
//     dirty segment's first batch is more than max.compaction.lag.ms old,
//     or, with nothing dirty, when the latest delete horizon the last pass
//     set has passed (Kafka's LogCleanerManager cleans such logs so that
//     expired tombstones go without new writes; kept in memory, as
//     Kafka's).
//   - A key map of the dirty range is built and the whole cleanable range
//     rewritten by package internal/kafkalog/compact's rules (latest record
//     per key; tombstones kept by the pass that first meets them, which
//     sets their batch's delete horizon, and dropped by a pass after
//     delete.retention.ms; aborted transactions dropped; markers dropped
//     once their transaction's batches are gone and their own horizon
//     passed; codec, producer id, epoch and sequence kept). Consecutive
//     segments are grouped so that their sizes add up to at most
//     segment.bytes (and their indexes to segment.index.bytes); each group
//     becomes one segment named by the group's first base offset, holding
//     the original offsets (gaps appear, base offsets stay), with rebuilt
//     indexes and a .txnindex of the aborted transactions whose batches it
//     still holds. The last batch of each group is kept, empty if need be,
//     so a cleaned segment ends where its group ended.
//   - Swap, one group at a time, under the log's lock (reads wait, they
//     never see half a swap): "<base>.{index,timeindex,txnindex,log}.cleaned"
//     are written and fsynced; renamed to ".swap" (the .log last), the
//     commit point; the group's old segment files renamed to ".deleted";
//     the ".swap" files renamed to live names; the ".deleted" files
//     removed. Each step ends with a directory fsync and a crash point
//     (CrashCleaned, CrashSwap, CrashDeleted, CrashLive).
//   - Open settles an interrupted swap before loading: ".cleaned" files are
//     removed (the old segments are whole); a ".swap" index without its
//     ".log.swap" is removed; for each "<base>.log.swap" the live files of
//     the segments with base offsets in [base, one past its last offset)
//     are removed and the ".swap" files renamed to live names; ".deleted"
//     files are removed.
//   - Checkpoint: after the last group, this partition's entry of
//     "cleaner-offset-checkpoint" in the log dir (the partition
//     directory's parent; Kafka's offset checkpoint format, other entries
//     kept, written tmp + fsync + rename + dir fsync) is set to the first
//     uncleanable offset (crash point CrashCheckpoint before). It is the
//     first dirty offset: every offset below it has been through at least
//     one cleaning, and in seglog it is always a segment's base offset, so a
//     rolled segment whose next segment starts at or below it holds cleaned
//     contents. A crash before the write leaves the older, lower value; the
//     checkpoint never runs ahead of the segments. A later pass may rewrite
//     segments below it again (to drop tombstones or newly superseded
//     keys).
//
// The directory must be named "<topic>-<partition>" for Clean
// (ErrNotPartitionDir otherwise): that names the checkpoint entry.
//
// # Codecs and timestamps (Kafka LogValidator)
//
//   - compression.type "producer" writes a batch with the codec the caller
//     gave AppendBatch (Append: none). Any other value is the codec of every
//     data batch, whatever the caller gave, as a broker recompresses a
//     producer's batch; a transactional batch keeps its producer id, epoch
//     and sequence. A control batch (a transaction marker) given
//     uncompressed stays uncompressed ("do not compress control records
//     unless they are written compressed").
//   - Payloads use Kafka's framing (package internal/codec): gzip a gzip
//     stream; snappy the xerial framing of Java's SnappyOutputStream (a
//     16-byte header, then length-prefixed blocks of 32 KiB input); lz4 an
//     LZ4 frame; zstd a zstd frame. compression.gzip.level (default -1,
//     zlib's 6), compression.lz4.level (default 9, LZ4's fast compressor;
//     other levels LZ4 HC) and compression.zstd.level (default 3) have
//     Kafka's ranges and defaults (KIP-390); see codec.Levels for how they
//     map onto the Go libraries.
//   - message.timestamp.type "LogAppendTime" builds each batch as usual
//     (baseTimestamp the first record's timestamp, records as deltas from
//     it) and then sets attributes bit 3 and maxTimestamp to the time of
//     the append, in ms from the Log's clock (DefaultRecordBatch
//     .setMaxTimestamp, CRC recomputed). Readers give every record of such
//     a batch the batch's maxTimestamp, so a consumer sees the append time.
//     The time index, the segment's max timestamp, OffsetForTimestamp,
//     segment.ms and, in the copier, retention.ms and local.retention.ms
//     all read batch maxTimestamps, so all of them go by append time. Control
//     batches get the append time too, as Kafka's markers do.
package seglog
