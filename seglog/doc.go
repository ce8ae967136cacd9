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
package seglog
