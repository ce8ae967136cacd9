// Package batch reads and writes the contents of a Kafka .log file: record
// batches (magic 2) and legacy message sets (magic 0 and 1). It is pure
// format code: functions over []byte and io.ReaderAt, no logging, no metrics.
//
// # Log entries
//
// A .log file is a sequence of entries laid end to end. Every entry, old or
// new, opens with the same 17 bytes, so a reader can tell the format of each
// entry from its magic byte and a log may mix magic 1 and magic 2 entries:
//
//	offset  0  int64   base offset (v2) or message offset (v0/v1)
//	offset  8  int32   length of the rest of the entry (excludes these 12 bytes)
//	offset 16  int8    magic (at byte 16 in both layouts)
//
// # Record batch, magic 2 (KIP-98)
//
// A 61-byte header followed by the records, all integers big-endian:
//
//	 0 baseOffset           int64
//	 8 batchLength          int32   bytes after this field (>= 49)
//	12 partitionLeaderEpoch int32
//	16 magic                int8    = 2
//	17 crc                  uint32  CRC-32C (Castagnoli) of bytes 21..end
//	21 attributes           int16   bits 0-2 codec (0 none, 1 gzip, 2 snappy,
//	                                3 lz4, 4 zstd), bit 3 timestamp type
//	                                (0 CreateTime, 1 LogAppendTime), bit 4
//	                                transactional, bit 5 control, bit 6 delete
//	                                horizon set (KIP-534)
//	23 lastOffsetDelta      int32   last offset = baseOffset + lastOffsetDelta
//	27 baseTimestamp        int64   ms since epoch ("first timestamp")
//	35 maxTimestamp         int64   ms since epoch
//	43 producerId           int64   -1 when not idempotent
//	51 producerEpoch        int16
//	53 baseSequence         int32
//	57 recordCount          int32
//	61 records              (compressed as a whole when codec != none)
//
// Each record is varint-framed; varints are zigzag base-128 as in protobuf:
//
//	length varint, attributes int8 (unused), timestampDelta varlong,
//	offsetDelta varint, keyLength varint (-1 null), key,
//	valueLength varint (-1 null), value, headerCount varint,
//	headers: keyLength varint, key (UTF-8), valueLength varint (-1 null), value
//
// A control batch (transaction markers, KRaft LEADER_CHANGE and snapshot
// markers) holds one record whose key is int16 version + int16 type.
//
// # Message, magic 0 and 1 (KIP-32)
//
//	 0 offset      int64
//	 8 messageSize int32   bytes after this field (>= 14 for v0, 22 for v1)
//	12 crc         uint32  CRC-32 (IEEE) of bytes 16..end
//	16 magic       int8    0 or 1
//	17 attributes  int8    bits 0-2 codec, bit 3 timestamp type (v1 only)
//	18 timestamp   int64   v1 only; -1 means none
//	   key         int32 length (-1 null) + bytes
//	   value       int32 length (-1 null) + bytes
//
// A compressed message (a "wrapper") carries a whole message set, compressed,
// as its value. The wrapper's offset is the offset of the LAST inner message.
// Inner offsets are absolute for magic 0 and relative (0..n-1) for magic 1,
// where the absolute offset is wrapperOffset - (n-1) + relative.
//
// # Reading rules
//
// A Batch describes one entry without decompressing it. Scanner walks the
// entries of a file, stops at the first structural error (length out of
// range, unknown magic, truncated tail) with a *kafkalog.CorruptionError
// naming the byte position, and reports CRC mismatches per entry when asked
// to verify. Records decodes the records of one entry, decompressing through
// a Decompressor so that this package needs only the standard library.
//
// A checksum does not cover every header field. Checker applies, entry by
// entry, the rules Kafka keeps for those fields across a segment (offsets
// increase and stay within the segment, a known magic, a possible leader
// epoch, no more records than offsets), and CheckRecords walks the records
// of an uncompressed batch against its header; rules.go lists each rule
// with its source in Kafka. FirstNonZero tells a preallocated file's zero
// tail (the end of the data) from garbage after the last entry.
//
// Sources: Apache Kafka DefaultRecordBatch.java, DefaultRecord.java,
// LegacyRecord.java, AbstractLegacyRecordBatch.java; KIP-98, KIP-32.
package batch
