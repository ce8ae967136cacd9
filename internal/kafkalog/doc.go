// Package kafkalog holds what is shared by the Kafka on-disk format packages
// below it: the file naming of a partition directory and the corruption error
// that every decoder returns.
//
// # Partition directory
//
// A broker keeps one directory per partition, named "<topic>-<partition>"
// (for example "orders-3"). A topic name may itself contain '-', so the
// partition number is whatever follows the last '-'. Directories that are
// being deleted or moved are renamed and are not live partitions:
//
//	<topic>-<partition>.<uuid>-delete   topic deletion in progress
//	<topic>-<partition>.<uuid>-future   replica move between log dirs
//	<topic>-<partition>.<uuid>-stray    KRaft stray replica
//
// # Segment files
//
// A partition is a sequence of segments. Each segment is named after its base
// offset, the offset the segment was created for, written as a 20-digit,
// zero-padded decimal number:
//
//	00000000000000000000.log        record batches (package batch)
//	00000000000000000000.index      sparse offset index (package index)
//	00000000000000000000.timeindex  sparse time index (package index)
//	00000000000000000000.txnindex   aborted-transaction index
//	00000000000000000206.snapshot   producer state as of offset 206
//	leader-epoch-checkpoint         epoch -> start offset (package epoch)
//
// The base offset is a lower bound, not the first offset present: log
// compaction removes records, so the first batch of a segment may start
// later, and offsets within a segment need not be contiguous. A producer
// snapshot is named after the offset it was taken at, which is the base
// offset of the segment that follows the one it describes.
//
// Files carrying one of the suffixes ".deleted" (retention removed the
// segment and an asynchronous delete is pending), ".cleaned" and ".swap"
// (log cleaner work in progress) are not live segment files; ParseFileName
// reports them with Live false.
//
// # Corruption
//
// Decoders never panic on bad bytes and never allocate more than the input
// justifies. They return a *CorruptionError that names the file (when known)
// and the byte position of the first bad byte, and that matches ErrCorrupt
// under errors.Is.
//
// Sources: Apache Kafka LocalLog.scala / LogFileUtils.java (file naming),
// UnifiedLog (directory suffixes).
package kafkalog
