// Package snapshot reads and writes Kafka's producer state snapshot files
// (<20-digit offset>.snapshot in a partition directory): the producers
// that had written to the partition up to that offset, with their last
// sequence numbers and open transactions, which a broker loads instead of
// replaying the log.
//
// # Format
//
// Big-endian, version 1 (the only one Kafka writes, since 0.11):
//
//	0  version   int16   1
//	2  crc       uint32  CRC-32C (Castagnoli) of bytes 6..end
//	6  count     int32   number of entries (-1: none)
//	10 entries   count x 46 bytes:
//	     producer_id               int64
//	     epoch                     int16
//	     last_sequence             int32
//	     last_offset               int64  (-1: the producer's last entry was a marker)
//	     offset_delta              int32  last sequence - first sequence of its last batch
//	     timestamp                 int64  max timestamp of its last batch, ms
//	     coordinator_epoch         int32
//	     current_txn_first_offset  int64  (-1: no transaction open)
//
// A file of no producers is 10 bytes. Source: Apache Kafka
// storage/.../log/ProducerStateManager.java (PID_SNAPSHOT_MAP_SCHEMA,
// PRODUCER_SNAPSHOT_ENTRY_SCHEMA, readSnapshot, writeSnapshot).
package snapshot

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/tierd/tierd/internal/kafkalog"
)

// Version is the snapshot format version this package reads and writes.
const Version = 1

// headerBytes is the size of version, crc and count; entryBytes of one
// entry.
const (
	headerBytes = 10
	entryBytes  = 46
	crcStart    = 6 // the CRC covers the bytes from here to the end
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is one producer's state.
type Entry struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastOffset            int64
	OffsetDelta           int32
	Timestamp             int64
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64
}

// FirstSequence is the first sequence number of the producer's last batch:
// LastSequence - OffsetDelta, wrapping below 0 to the top of the int32
// range as producer sequences do (Kafka's DefaultRecordBatch.decrementSequence).
func (e Entry) FirstSequence() int32 {
	if e.LastSequence < e.OffsetDelta {
		return int32(int64(math.MaxInt32) - int64(e.OffsetDelta-e.LastSequence) + 1)
	}
	return e.LastSequence - e.OffsetDelta
}

// Parse decodes a snapshot file. It returns the entries it could decode
// and, for a file that is not a whole valid snapshot, a
// *kafkalog.CorruptionError with the byte position: an unknown version
// (position 0), a CRC that does not match (position 2; the entries are
// still returned, as read), a count the file is too short for, or bytes
// after the last entry.
func Parse(data []byte) ([]Entry, error) {
	if len(data) < headerBytes {
		return nil, kafkalog.Corruptf(int64(len(data)), "truncated snapshot: %d bytes, a snapshot has at least %d", len(data), headerBytes)
	}
	if v := int16(binary.BigEndian.Uint16(data)); v != Version {
		return nil, kafkalog.Corruptf(0, "snapshot version %d, want %d", v, Version)
	}
	count := int32(binary.BigEndian.Uint32(data[crcStart:]))
	if count < -1 {
		return nil, kafkalog.Corruptf(crcStart, "entry count %d", count)
	}
	n := max(int(count), 0)
	if avail := (len(data) - headerBytes) / entryBytes; n > avail {
		return nil, kafkalog.Corruptf(int64(len(data)), "truncated snapshot: %d entries announced, room for %d", n, avail)
	}
	out := make([]Entry, n)
	for i := range out {
		b := data[headerBytes+i*entryBytes:]
		out[i] = Entry{
			ProducerID:            int64(binary.BigEndian.Uint64(b)),
			ProducerEpoch:         int16(binary.BigEndian.Uint16(b[8:])),
			LastSequence:          int32(binary.BigEndian.Uint32(b[10:])),
			LastOffset:            int64(binary.BigEndian.Uint64(b[14:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(b[22:])),
			Timestamp:             int64(binary.BigEndian.Uint64(b[26:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(b[34:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(b[38:])),
		}
	}
	if end := headerBytes + n*entryBytes; end != len(data) {
		return out, kafkalog.Corruptf(int64(end), "%d bytes after the last of %d entries", len(data)-end, n)
	}
	if stored, computed := binary.BigEndian.Uint32(data[2:]), crc32.Checksum(data[crcStart:], castagnoli); stored != computed {
		return out, kafkalog.Corruptf(2, "snapshot CRC 0x%08x does not match its contents (0x%08x)", stored, computed)
	}
	return out, nil
}

// Append appends the snapshot file of entries to dst, as a broker writes
// it (version 1, CRC filled in).
func Append(dst []byte, entries []Entry) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, Version)
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.ProducerEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastSequence))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.OffsetDelta))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(dst[start+2:], crc32.Checksum(dst[start+crcStart:], castagnoli))
	return dst
}
