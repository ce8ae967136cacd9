// Package index reads and writes a segment's sparse indexes: the offset
// index (.index), the time index (.timeindex) and the aborted-transaction
// index (.txnindex). Integers are big-endian; offsets in the offset and time
// index are stored relative to the segment's base offset (the number in the
// file name) and returned here as absolute offsets.
//
// # Offset index: 8-byte entries
//
//	relativeOffset int32   offset - baseOffset
//	position       int32   byte position of a batch in the .log
//
// An entry (o, p) means: the batch starting at byte p of the log ends at
// offset o (Kafka 2.x+ indexes a batch by its last offset). Entries are
// strictly increasing in both fields. A broker adds an entry when more than
// index.interval.bytes have been appended since the last one, so the first
// batch of a segment (position 0) never has an entry.
//
// # Time index: 12-byte entries
//
//	timestamp      int64   ms; the largest timestamp seen so far
//	relativeOffset int32   offset (of the batch) holding that timestamp
//
// Timestamps strictly increase and offsets never decrease. The broker adds
// one more entry when the segment is rolled.
//
// # Preallocation and the real end
//
// A broker preallocates each index of the active segment (segment.index.bytes,
// 10 MiB by default) filled with zeros and trims it when the segment rolls or
// the broker stops cleanly. A file can therefore end in zero padding, and a
// crash can leave it untrimmed. The decoders find the real end as the first
// entry after entry 0 that is all zero or does not increase; an all-zero
// entry 0 means an empty index (a real entry 0 is never all zero: position 0
// is never indexed, and a time entry (0, baseOffset) would need a timestamp
// of 1970-01-01T00:00:00Z). A file whose length is not a multiple of the
// entry size is reported as corrupt after the entries before the partial one.
//
// # Lookup
//
// LookupOffset returns the largest entry at or below the target offset; the
// caller scans the log forward from its position. LookupTime returns the
// largest entry whose timestamp is below the target; every record up to its
// offset has a smaller timestamp, so the scan can start there.
//
// # Transaction index: 34-byte entries
//
//	version int16 (0), producerId int64, firstOffset int64,
//	lastOffset int64, lastStableOffset int64
//
// Sources: Apache Kafka OffsetIndex.java, TimeIndex.java, AbstractIndex.java,
// TransactionIndex.java, LogSegment.java (when entries are written).
package index
