package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Params are the header fields of a v2 batch to build. The zero value with
// NewParams's -1 producer fields is a plain non-idempotent batch.
type Params struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Codec                Codec
	TimestampType        TimestampType // CreateTime (default) or LogAppendTime
	Transactional        bool
	Control              bool
	ProducerID           int64 // -1 when not idempotent
	ProducerEpoch        int16 // -1 when not idempotent
	BaseSequence         int32 // -1 when not idempotent
}

// NewParams returns Params for a non-idempotent, uncompressed CreateTime
// batch starting at baseOffset.
func NewParams(baseOffset int64, leaderEpoch int32) Params {
	return Params{BaseOffset: baseOffset, PartitionLeaderEpoch: leaderEpoch, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

// ErrEmptyBatch is returned by AppendBatch for zero records.
var ErrEmptyBatch = errors.New("batch: a batch needs at least one record")

// AppendBatch appends to dst one v2 record batch holding recs and returns
// the extended slice. Record i gets offset BaseOffset+i (the records'
// Offset fields are ignored); the batch's first timestamp is recs[0]'s and
// its max timestamp the largest. comp is used only when p.Codec is not
// CodecNone. The CRC-32C is computed over attributes..end as Kafka does.
func AppendBatch(dst []byte, p Params, recs []Record, comp Compressor) ([]byte, error) {
	if len(recs) == 0 {
		return nil, ErrEmptyBatch
	}
	if len(recs) > math.MaxInt32 {
		return nil, fmt.Errorf("batch: %d records do not fit a batch", len(recs))
	}
	first, maxTS := recs[0].Timestamp, recs[0].Timestamp
	for _, r := range recs[1:] {
		maxTS = max(maxTS, r.Timestamp)
	}
	attrs := int16(p.Codec) & codecMask
	if p.TimestampType == LogAppendTime {
		attrs |= timestampTypeBit
	}
	if p.Transactional {
		attrs |= transactionalBit
	}
	if p.Control {
		attrs |= controlBit
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.BaseOffset))
	dst = binary.BigEndian.AppendUint32(dst, 0) // length, patched below
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.PartitionLeaderEpoch))
	dst = append(dst, 2)
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc, patched below
	dst = binary.BigEndian.AppendUint16(dst, uint16(attrs))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(recs)-1))
	dst = binary.BigEndian.AppendUint64(dst, uint64(first))
	dst = binary.BigEndian.AppendUint64(dst, uint64(maxTS))
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(p.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.BaseSequence))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(recs)))
	if p.Codec == CodecNone {
		for i, r := range recs {
			dst = appendRecord(dst, r, r.Timestamp-first, int64(i))
		}
	} else {
		if comp == nil {
			return nil, fmt.Errorf("%w: %s (no compressor)", ErrUnsupportedCodec, p.Codec)
		}
		var plain []byte
		for i, r := range recs {
			plain = appendRecord(plain, r, r.Timestamp-first, int64(i))
		}
		var err error
		if dst, err = comp.Compress(p.Codec, dst, plain); err != nil {
			return nil, fmt.Errorf("compress %s payload: %w", p.Codec, err)
		}
	}
	size := len(dst) - start
	if size-LogOverhead > math.MaxInt32 {
		return nil, fmt.Errorf("batch: %d bytes do not fit a batch", size)
	}
	binary.BigEndian.PutUint32(dst[start+8:], uint32(size-LogOverhead))
	crc := crc32.Checksum(dst[start+v2CRCStart:], castagnoli)
	binary.BigEndian.PutUint32(dst[start+17:], crc)
	return dst, nil
}

// RecordSize returns the bytes one uncompressed v2 record takes in a batch,
// its length prefix included.
func RecordSize(r Record, tsDelta, offDelta int64) int {
	body := recordBodySize(r, tsDelta, offDelta)
	return varintLen(int64(body)) + body
}

func recordBodySize(r Record, tsDelta, offDelta int64) int {
	n := 1 + varintLen(tsDelta) + varintLen(offDelta)
	n += bytesSize(r.Key) + bytesSize(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	return n
}

func bytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return appendVarint(dst, -1)
	}
	return append(appendVarint(dst, int64(len(b))), b...)
}

func appendRecord(dst []byte, r Record, tsDelta, offDelta int64) []byte {
	dst = appendVarint(dst, int64(recordBodySize(r, tsDelta, offDelta)))
	dst = append(dst, 0) // attributes
	dst = appendVarint(dst, tsDelta)
	dst = appendVarint(dst, offDelta)
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = appendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = appendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value)
	}
	return dst
}
