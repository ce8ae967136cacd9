package compact

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// Attribute bits of a v2 batch this package sets or reads (Apache Kafka
// DefaultRecordBatch).
const (
	// DeleteHorizonBit is attributes bit 6 (KIP-534): the base timestamp
	// holds the delete horizon.
	DeleteHorizonBit = 0x40
	codecMask        = 0x07
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRetained appends to dst a v2 batch rebuilt from b's header and the
// kept records, as MemoryRecords.buildRetainedRecordsInto does: same base
// offset, last offset delta, partition leader epoch, attributes (codec,
// timestamp type, transactional, control), producer id, epoch and base
// sequence; each record keeps its offset, timestamp, key, value and
// headers. The base timestamp is horizon when horizon is not
// batch.NoTimestamp (and attributes bit 6 is then set), else the first kept
// record's timestamp. The max timestamp is the largest kept record
// timestamp, or the original one for LogAppendTime batches. It returns the
// new max timestamp.
func appendRetained(dst []byte, b batch.Batch, kept []batch.Record, horizon int64, comp batch.Compressor) ([]byte, int64, error) {
	attrs := b.Attributes &^ DeleteHorizonBit
	baseTS := kept[0].Timestamp
	if horizon != batch.NoTimestamp {
		attrs |= DeleteHorizonBit
		baseTS = horizon
	}
	maxTS := kept[0].Timestamp
	for _, r := range kept[1:] {
		maxTS = max(maxTS, r.Timestamp)
	}
	if b.TimestampType == batch.LogAppendTime {
		maxTS = b.MaxTimestamp
	}
	var plain []byte
	for _, r := range kept {
		plain = appendRecord(plain, r, r.Timestamp-baseTS, r.Offset-b.BaseOffset)
	}
	start := len(dst)
	dst = appendHeader(dst, b, attrs, baseTS, maxTS, int32(len(kept)))
	if b.Codec == batch.CodecNone {
		dst = append(dst, plain...)
	} else {
		if comp == nil {
			return nil, 0, fmt.Errorf("%w: %s (no compressor)", batch.ErrUnsupportedCodec, b.Codec)
		}
		var err error
		if dst, err = comp.Compress(b.Codec, dst, plain); err != nil {
			return nil, 0, fmt.Errorf("compress %s payload of batch at offset %d: %w", b.Codec, b.BaseOffset, err)
		}
	}
	if len(dst)-start-batch.LogOverhead > math.MaxInt32 {
		return nil, 0, fmt.Errorf("compact: rewritten batch at offset %d too large", b.BaseOffset)
	}
	return finish(dst, start), maxTS, nil
}

// appendEmpty appends the header of b with no records, as
// DefaultRecordBatch.writeEmptyHeader does for a batch kept only for its
// producer state: no codec, no delete horizon, base and max timestamp both
// the original max timestamp, the offsets and producer fields unchanged.
func appendEmpty(dst []byte, b batch.Batch) []byte {
	attrs := b.Attributes &^ (DeleteHorizonBit | codecMask)
	start := len(dst)
	dst = appendHeader(dst, b, attrs, b.MaxTimestamp, b.MaxTimestamp, 0)
	return finish(dst, start)
}

func appendHeader(dst []byte, b batch.Batch, attrs int16, baseTS, maxTS int64, count int32) []byte {
	be := binary.BigEndian
	dst = be.AppendUint64(dst, uint64(b.BaseOffset))
	dst = be.AppendUint32(dst, 0) // length, set by finish
	dst = be.AppendUint32(dst, uint32(b.PartitionLeaderEpoch))
	dst = append(dst, 2)
	dst = be.AppendUint32(dst, 0) // crc, set by finish
	dst = be.AppendUint16(dst, uint16(attrs))
	dst = be.AppendUint32(dst, uint32(b.LastOffset-b.BaseOffset))
	dst = be.AppendUint64(dst, uint64(baseTS))
	dst = be.AppendUint64(dst, uint64(maxTS))
	dst = be.AppendUint64(dst, uint64(b.ProducerID))
	dst = be.AppendUint16(dst, uint16(b.ProducerEpoch))
	dst = be.AppendUint32(dst, uint32(b.BaseSequence))
	return be.AppendUint32(dst, uint32(count))
}

// finish sets the length and the CRC-32C (attributes to the end) of the
// batch starting at dst[start].
func finish(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-batch.LogOverhead))
	binary.BigEndian.PutUint32(dst[start+17:], crc32.Checksum(dst[start+21:], castagnoli))
	return dst
}

// appendRecord appends one v2 record (DefaultRecord.writeTo): length,
// attributes 0, timestamp delta, offset delta, key, value, headers.
func appendRecord(dst []byte, r batch.Record, tsDelta, offDelta int64) []byte {
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, offDelta)
	body = appendBytes(body, r.Key)
	body = appendBytes(body, r.Value)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = binary.AppendVarint(body, int64(len(h.Key)))
		body = append(body, h.Key...)
		body = appendBytes(body, h.Value)
	}
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}
