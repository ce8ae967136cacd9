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
