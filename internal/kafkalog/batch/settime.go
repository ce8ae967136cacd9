package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// SetMaxTimestamp rewrites the timestamp type (attributes bit 3) and the
// maxTimestamp field (ms) of the v2 batch at the start of entry, and its
// CRC-32C, in place. It is what a broker does to a batch it appends to a
// topic with message.timestamp.type=LogAppendTime (Kafka's
// DefaultRecordBatch.setMaxTimestamp, called by LogValidator with the
// append time): the records keep their create-time deltas from
// baseTimestamp, but a reader gives every record of a LogAppendTime batch
// the batch's maxTimestamp. entry must hold one whole v2 batch (Batch.Size
// bytes); a legacy (magic 0/1) entry or a short buffer is an error and
// entry is left as it was.
func SetMaxTimestamp(entry []byte, tt TimestampType, ts int64) error {
	b, err := ParseHeader(entry, 0)
	if err != nil {
		return err
	}
	if b.Magic != 2 {
		return fmt.Errorf("batch: set max timestamp: magic %d entry, want a v2 batch", b.Magic)
	}
	if int(b.Size) != len(entry) {
		return fmt.Errorf("batch: set max timestamp: entry size %d but %d bytes given", b.Size, len(entry))
	}
	attrs := binary.BigEndian.Uint16(entry[21:]) &^ timestampTypeBit
	if tt == LogAppendTime {
		attrs |= timestampTypeBit
	}
	binary.BigEndian.PutUint16(entry[21:], attrs)
	binary.BigEndian.PutUint64(entry[35:], uint64(ts))
	binary.BigEndian.PutUint32(entry[17:], crc32.Checksum(entry[v2CRCStart:], castagnoli))
	return nil
}
