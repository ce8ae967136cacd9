// Package compact holds the record-level rules of Kafka's log cleaner
// (cleanup.policy=compact): which records, batches, tombstones and
// transaction markers a cleaning keeps, and how a kept batch is rewritten.
// It is pure format code over []byte, used by seglog's cleaner and by the
// copier's remote compaction, which rewrite the batches of one or more
// segments the same way.
//
// # Use
//
// A cleaning covers the entries of a log from its start up to the first
// uncleanable offset; the dirty range is the part from the first dirty
// offset (the cleaner checkpoint) on. Build an OffsetMap from every entry
// of the dirty range, then run every entry of the whole range, in offset
// order, through one Filter:
//
//	m := compact.NewOffsetMap(firstDirty, aborted, dec)
//	for each dirty segment { for each entry e { m.Add(e) }; m.Cover(segmentEnd) }
//	f := compact.NewFilter(m, compact.Options{NowMs: now, DeleteRetentionMs: d, ...})
//	for each entry e of [start, end) { out, res, err = f.Batch(out, e) }
//	kept := f.AbortedKept() // the .txnindex entries the output keeps
//
// The new first dirty offset is end (Kafka checkpoints the map's latest
// offset + 1, and Cover makes the map's latest offset the end of its last
// segment minus one). A caller writing several output segments in one pass
// calls f.SetUpperBound(segmentEnd) before each, so each keeps its last
// batch (possibly empty) and ends where its input ended.
//
// # Rules
//
// From Apache Kafka's LogCleaner.scala (Cleaner.buildOffsetMapForSegment,
// cleanInto, shouldRetainRecord, CleanedTransactionMetadata),
// MemoryRecords.filterTo / buildRetainedRecordsInto,
// DefaultRecordBatch.writeEmptyHeader, and KIP-534 (delete horizon):
//
//   - The offset map holds, for each key of the dirty range, the offset of
//     its latest record. Records with a null key, control batches and
//     batches of aborted transactions do not enter it.
//   - A data record is kept when its offset is past the map's latest
//     offset, or when it has a key, no later offset for that key is in the
//     map, and it has a value or is a tombstone still within its batch's
//     delete horizon (or in a batch without one). Records with a null key
//     are dropped.
//   - Tombstones take two cleanings: the first one that keeps a tombstone
//     sets its batch's delete horizon (attributes bit 6, base timestamp =
//     now + delete.retention.ms); a cleaning at or after the horizon drops
//     it.
//   - Aborted transactions (from .txnindex entries) become ongoing at their
//     first offset; a transactional data batch of a producer with an
//     ongoing aborted transaction is dropped whole. An ABORT marker ends
//     it.
//   - A transaction marker may go once no batch of its transaction was read
//     in the cleaning (an earlier cleaning removed them): the first such
//     cleaning sets the marker's delete horizon, a cleaning past the
//     horizon drops it. Other control records (LEADER_CHANGE and so on) are
//     kept.
//   - A batch holding an active producer's last data offset (or, when the
//     producer's last entry is a marker, that marker) is kept even when
//     nothing in it stays, as an empty batch (no records, no codec, both
//     timestamps the original max timestamp), so the producer's last
//     sequence and epoch survive. So is the last batch of the cleaning
//     round (Options.UpperBound).
//   - Any other batch left empty is dropped.
//   - A batch whose records all stay and whose horizon needs no setting is
//     kept byte for byte. Otherwise it is rewritten: same base offset and
//     last offset delta (so gaps appear and the last sequence holds), same
//     partition leader epoch, attributes, codec (re-compressed), producer
//     id and epoch, base sequence; each record keeps its offset, timestamp,
//     key, value and headers; the base timestamp is the first kept
//     record's (or the delete horizon), the max timestamp the largest kept
//     (the original one for LogAppendTime); the CRC-32C is recomputed.
//   - Legacy entries (magic 0 and 1) are kept as they are and do not enter
//     the map.
//
// The filter never reorders anything: its output is a subsequence of its
// input, records and batches in the same offset order.
package compact
