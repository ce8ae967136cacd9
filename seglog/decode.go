package seglog

import (
	"fmt"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// Codec is a record batch's compression codec (attributes bits 0-2, Kafka
// record batch v2), as AppendBatch takes it.
type Codec = batch.Codec

// The codecs, with Kafka's attribute values.
const (
	CodecNone   = batch.CodecNone
	CodecGzip   = batch.CodecGzip
	CodecSnappy = batch.CodecSnappy
	CodecLZ4    = batch.CodecLZ4
	CodecZstd   = batch.CodecZstd
)

// DecodeRecords decodes what Read returns, whole record batches (v2, or
// legacy message sets), into their records in offset order, each with its
// offset, timestamp (ms; the log append time for a LogAppendTime batch),
// key, value (nil for a tombstone) and headers. Control batches
// (transaction markers) are skipped. Every batch's CRC is checked.
// Errors: a batch that does not parse, whose CRC does not match, or whose
// compressed records do not decode (wrapped, with the batch's base
// offset).
func DecodeRecords(data []byte) ([]Record, error) {
	var out []Record
	for p := 0; p < len(data); {
		b, err := batch.ParseHeader(data[p:], int64(p))
		if err != nil {
			return out, fmt.Errorf("seglog: decode batch at byte %d: %w", p, err)
		}
		raw := data[p : p+int(b.Size)]
		if !batch.CheckCRC(raw) {
			return out, fmt.Errorf("seglog: batch at offset %d: CRC mismatch", b.BaseOffset)
		}
		p += int(b.Size)
		if b.Control {
			continue
		}
		recs, err := batch.Records(raw, codec.Kafka)
		if err != nil {
			return out, fmt.Errorf("seglog: batch at offset %d: %w", b.BaseOffset, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}
