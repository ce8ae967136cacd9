package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/tierd/tierd/internal/kafkalog"
)

// Layout constants, in bytes.
const (
	// LogOverhead is the offset and length prefix shared by every entry.
	LogOverhead = 12
	// PrefixSize is the bytes needed to tell an entry's size and magic.
	PrefixSize = 17
	// HeaderSize is the size of a v2 record batch header.
	HeaderSize = 61
	// MinBatchLength is the smallest legal v2 batchLength field.
	MinBatchLength = HeaderSize - LogOverhead
	// legacyMinV0/V1 are the smallest legal v0/v1 messageSize fields.
	legacyMinV0 = 14
	legacyMinV1 = 22

	v2CRCStart    = 21
	legacyCRCFrom = 16
)

// Attribute bits of a v2 batch (the low 3 bits are the codec).
const (
	codecMask         = 0x07
	timestampTypeBit  = 0x08
	transactionalBit  = 0x10
	controlBit        = 0x20
	deleteHorizonBit  = 0x40
	legacyTimestampV1 = 0x08
)

// NoTimestamp is Kafka's "no timestamp" value (RecordBatch.NO_TIMESTAMP).
const NoTimestamp int64 = -1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Codec is the compression codec of a batch (attributes bits 0-2).
type Codec int8

// Codecs, with Kafka's ids.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

// String returns Kafka's name for c: none, gzip, snappy, lz4, zstd.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", int8(c))
}

// TimestampType says who set a batch's timestamps (attributes bit 3).
type TimestampType int8

// Timestamp types. NoTimestampType is used for magic 0, which has none.
const (
	NoTimestampType TimestampType = -1
	CreateTime      TimestampType = 0
	LogAppendTime   TimestampType = 1
)

// String returns "CreateTime", "LogAppendTime" or "NoTimestampType".
func (t TimestampType) String() string {
	switch t {
	case CreateTime:
		return "CreateTime"
	case LogAppendTime:
		return "LogAppendTime"
	}
	return "NoTimestampType"
}

// Batch describes one entry of a .log file, as read from its header alone.
//
// For a v2 batch every field comes from the header. For a legacy message,
// PartitionLeaderEpoch, ProducerID, ProducerEpoch and BaseSequence take
// Kafka's "none" values (-1). For a legacy compressed wrapper the header only
// gives LastOffset; BaseOffset is -1 and Count is -1 until InspectWrapper
// has looked inside.
type Batch struct {
	Position             int64 // byte position of the entry in its file
	Size                 int32 // total bytes, LogOverhead included
	BaseOffset           int64 // first offset; -1 if unknown (legacy wrapper)
	LastOffset           int64
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32 // as stored
	Attributes           int16  // raw attributes (legacy: the int8 widened)
	Codec                Codec
	TimestampType        TimestampType
	Transactional        bool
	Control              bool
	FirstTimestamp       int64 // ms; NoTimestamp when absent
	MaxTimestamp         int64 // ms; NoTimestamp when absent
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	Count                int32 // number of records; -1 if unknown (legacy wrapper)
}

// End returns the byte position just past the entry.
func (b *Batch) End() int64 { return b.Position + int64(b.Size) }

// Legacy reports whether the entry is a magic 0 or 1 message.
func (b *Batch) Legacy() bool { return b.Magic < 2 }

// ParsePrefix reads the 17-byte prefix of the entry starting at buf[0] and
// returns its total size (LogOverhead included) and magic. It checks that
// the length field is legal for the magic; it does not check that the bytes
// are present. pos is used only for error positions.
func ParsePrefix(buf []byte, pos int64) (size int32, magic int8, err error) {
	if len(buf) < PrefixSize {
		return 0, 0, kafkalog.Corruptf(pos, "truncated entry: %d bytes, need %d for offset, length and magic", len(buf), PrefixSize)
	}
	length := int32(binary.BigEndian.Uint32(buf[8:]))
	magic = int8(buf[16])
	var min int32
	switch magic {
	case 0:
		min = legacyMinV0
	case 1:
		min = legacyMinV1
	case 2:
		min = MinBatchLength
	default:
		return 0, magic, kafkalog.Corruptf(pos+16, "unknown magic %d", magic)
	}
	if length < min {
		return 0, magic, kafkalog.Corruptf(pos+8, "length %d below minimum %d for magic %d", length, min, magic)
	}
	if int64(length)+LogOverhead > 1<<31-1 {
		return 0, magic, kafkalog.Corruptf(pos+8, "length %d too large", length)
	}
	return length + LogOverhead, magic, nil
}

// ParseHeader reads the header of the entry starting at buf[0]. buf must
// hold at least the header: HeaderSize bytes for v2, the whole message for
// legacy entries (whose header is not of fixed size). pos is the entry's
// position in its file, recorded in the result and in errors. The CRC is
// not checked; use CheckCRC on the whole entry.
func ParseHeader(buf []byte, pos int64) (Batch, error) {
	size, magic, err := ParsePrefix(buf, pos)
	if err != nil {
		return Batch{}, err
	}
	if magic == 2 {
		return parseV2(buf, pos, size)
	}
	if len(buf) < int(size) {
		return Batch{}, kafkalog.Corruptf(pos, "truncated message: %d of %d bytes", len(buf), size)
	}
	return parseLegacy(buf[:size], pos)
}

func parseV2(buf []byte, pos int64, size int32) (Batch, error) {
	if len(buf) < HeaderSize {
		return Batch{}, kafkalog.Corruptf(pos, "truncated batch header: %d of %d bytes", len(buf), HeaderSize)
	}
	be := binary.BigEndian
	attrs := int16(be.Uint16(buf[21:]))
	b := Batch{
		Position:             pos,
		Size:                 size,
		BaseOffset:           int64(be.Uint64(buf[0:])),
		PartitionLeaderEpoch: int32(be.Uint32(buf[12:])),
		Magic:                2,
		CRC:                  be.Uint32(buf[17:]),
		Attributes:           attrs,
		Codec:                Codec(attrs & codecMask),
		TimestampType:        CreateTime,
		Transactional:        attrs&transactionalBit != 0,
		Control:              attrs&controlBit != 0,
		FirstTimestamp:       int64(be.Uint64(buf[27:])),
		MaxTimestamp:         int64(be.Uint64(buf[35:])),
		ProducerID:           int64(be.Uint64(buf[43:])),
		ProducerEpoch:        int16(be.Uint16(buf[51:])),
		BaseSequence:         int32(be.Uint32(buf[53:])),
		Count:                int32(be.Uint32(buf[57:])),
	}
	if attrs&timestampTypeBit != 0 {
		b.TimestampType = LogAppendTime
	}
	delta := int32(be.Uint32(buf[23:]))
	switch {
	case b.BaseOffset < 0:
		return Batch{}, kafkalog.Corruptf(pos, "negative base offset %d", b.BaseOffset)
	case delta < 0:
		return Batch{}, kafkalog.Corruptf(pos+23, "negative last offset delta %d", delta)
	case b.BaseOffset > math.MaxInt64-int64(delta):
		// Offsets are int64 (Kafka's long); a last offset past its range
		// is no offset a log can hold.
		return Batch{}, kafkalog.Corruptf(pos+23, "base offset %d + last offset delta %d overflows an offset", b.BaseOffset, delta)
	case b.Codec > CodecZstd:
		return Batch{}, kafkalog.Corruptf(pos+21, "unknown compression codec %d", b.Codec)
	case b.Count < 0:
		return Batch{}, kafkalog.Corruptf(pos+57, "negative record count %d", b.Count)
	}
	b.LastOffset = b.BaseOffset + int64(delta)
	return b, nil
}

func parseLegacy(msg []byte, pos int64) (Batch, error) {
	b, err := legacyFixed(msg, pos, int32(len(msg)))
	if err != nil {
		return b, err
	}
	kpos := legacyKeyPos(b.Magic)
	keyLen := int32(binary.BigEndian.Uint32(msg[kpos:]))
	vpos, err := legacyValuePos(b, kpos, keyLen)
	if err != nil {
		return Batch{}, err
	}
	return checkLegacyValue(b, vpos, int32(binary.BigEndian.Uint32(msg[vpos:])))
}

// legacyKeyPos is where a message's key length sits.
func legacyKeyPos(magic int8) int {
	if magic == 1 {
		return 26
	}
	return 18
}

// legacyFixed decodes the fixed fields of a magic 0/1 message of the given
// size from its first legacyKeyPos+4 bytes.
func legacyFixed(msg []byte, pos int64, size int32) (Batch, error) {
	be := binary.BigEndian
	attrs := int8(msg[17])
	b := Batch{
		Position:             pos,
		Size:                 size,
		LastOffset:           int64(be.Uint64(msg[0:])),
		PartitionLeaderEpoch: -1,
		Magic:                int8(msg[16]),
		CRC:                  be.Uint32(msg[12:]),
		Attributes:           int16(attrs),
		Codec:                Codec(attrs & codecMask),
		TimestampType:        NoTimestampType,
		FirstTimestamp:       NoTimestamp,
		MaxTimestamp:         NoTimestamp,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
		BaseOffset:           -1,
		Count:                -1,
	}
	if b.LastOffset < 0 {
		return Batch{}, kafkalog.Corruptf(pos, "negative offset %d", b.LastOffset)
	}
	if b.Codec > CodecZstd {
		return Batch{}, kafkalog.Corruptf(pos+17, "unknown compression codec %d", b.Codec)
	}
	if b.Magic == 1 {
		b.TimestampType = CreateTime
		if attrs&legacyTimestampV1 != 0 {
			b.TimestampType = LogAppendTime
		}
		ts := int64(be.Uint64(msg[18:]))
		b.FirstTimestamp, b.MaxTimestamp = ts, ts
	}
	if b.Codec == CodecNone {
		b.BaseOffset, b.Count = b.LastOffset, 1
	}
	return b, nil
}

// legacyValuePos checks the key length and returns where the value length
// sits.
func legacyValuePos(b Batch, kpos int, keyLen int32) (int, error) {
	if keyLen < -1 || int64(kpos)+4+int64(max(keyLen, 0))+4 > int64(b.Size) {
		return 0, kafkalog.Corruptf(b.Position+int64(kpos), "key length %d out of range for a %d-byte message", keyLen, b.Size)
	}
	return kpos + 4 + int(max(keyLen, 0)), nil
}

// checkLegacyValue checks that the value length ends the message exactly.
func checkLegacyValue(b Batch, vpos int, valLen int32) (Batch, error) {
	end := int64(vpos) + 4 + int64(max(valLen, 0))
	if valLen < -1 || end > int64(b.Size) {
		return Batch{}, kafkalog.Corruptf(b.Position+int64(vpos), "value length %d out of range for a %d-byte message", valLen, b.Size)
	}
	if end != int64(b.Size) {
		return Batch{}, kafkalog.Corruptf(b.Position+end, "%d trailing bytes after message value", int64(b.Size)-end)
	}
	return b, nil
}

// CheckCRC reports whether the stored checksum of the whole entry in buf
// (len(buf) == Size) matches its contents: CRC-32C over bytes 21..end for
// v2, CRC-32 (IEEE) over bytes 16..end for magic 0 and 1.
func CheckCRC(buf []byte) bool {
	if len(buf) < PrefixSize {
		return false
	}
	if buf[16] == 2 {
		if len(buf) < HeaderSize {
			return false
		}
		return crc32.Checksum(buf[v2CRCStart:], castagnoli) == binary.BigEndian.Uint32(buf[17:])
	}
	return crc32.ChecksumIEEE(buf[legacyCRCFrom:]) == binary.BigEndian.Uint32(buf[12:])
}

// crcHasher returns the checksum algorithm and the first covered byte for
// an entry with the given magic.
func crcHasher(magic int8) (table *crc32.Table, from int) {
	if magic == 2 {
		return castagnoli, v2CRCStart
	}
	return crc32.IEEETable, legacyCRCFrom
}
