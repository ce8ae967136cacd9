package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/tierd/tierd/internal/kafkalog"
)

// MaxDecompressed is the most bytes one batch may decompress to (256 MiB).
// Kafka's own limits (message.max.bytes, 1 MiB by default, on the
// compressed size) are far below; the cap only stops a malicious payload
// from exhausting memory.
const MaxDecompressed = 256 << 20

// DecompressLimit returns the output limit for a payload of srcLen bytes:
// 256 times its size (beyond any real codec's ratio on real records), at
// least 16 MiB and at most MaxDecompressed, so a few bad bytes cannot claim
// much memory.
func DecompressLimit(srcLen int) int {
	return min(MaxDecompressed, max(16<<20, 256*srcLen))
}

// ErrUnsupportedCodec is returned when a Decompressor or Compressor does not
// handle a batch's codec.
var ErrUnsupportedCodec = errors.New("batch: unsupported compression codec")

// Decompressor inflates a compressed batch payload. Implementations must
// return an error, not a larger result, when the output would exceed max
// bytes.
type Decompressor interface {
	Decompress(c Codec, src []byte, max int) ([]byte, error)
}

// Compressor deflates a batch payload, appending to dst.
type Compressor interface {
	Compress(c Codec, dst, src []byte) ([]byte, error)
}

// Stdlib handles the codecs the Go standard library can: none and gzip.
// Package internal/codec handles all of Kafka's.
var Stdlib stdlibCodec

type stdlibCodec struct{}

// Decompress implements Decompressor for CodecGzip.
func (stdlibCodec) Decompress(c Codec, src []byte, max int) ([]byte, error) {
	if c != CodecGzip {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedCodec, c)
	}
	zr, err := gzip.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return ReadLimited(zr, max)
}

// Compress implements Compressor for CodecGzip.
func (stdlibCodec) Compress(c Codec, dst, src []byte) ([]byte, error) {
	if c != CodecGzip {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedCodec, c)
	}
	buf := bytes.NewBuffer(dst)
	zw := gzip.NewWriter(buf)
	if _, err := zw.Write(src); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadLimited reads r to its end, failing once more than max bytes come out.
func ReadLimited(r io.Reader, max int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > max {
		return nil, fmt.Errorf("decompressed payload exceeds %d bytes", max)
	}
	return out, nil
}

// Record is one record with its absolute offset and timestamp resolved.
// Key and Value are nil for a null key or value.
type Record struct {
	Offset    int64
	Timestamp int64 // ms since epoch; NoTimestamp for magic 0
	Key       []byte
	Value     []byte
	Headers   []RecordHeader // always empty for magic 0 and 1
}

// RecordHeader is one record header (v2 only).
type RecordHeader struct {
	Key   string
	Value []byte // nil for a null value
}

// Records decodes the records of the entry in raw (one whole entry, as the
// Scanner's Raw returns it), decompressing through dec (which may be nil
// for uncompressed entries). Offsets are absolute. Timestamps follow Kafka:
// LogAppendTime batches give every record the batch's max timestamp. The
// returned slices alias raw or the decompressed buffer. Errors are
// *kafkalog.CorruptionError (positions relative to raw) or the
// decompressor's.
func Records(raw []byte, dec Decompressor) ([]Record, error) {
	b, err := ParseHeader(raw, 0)
	if err != nil {
		return nil, err
	}
	if int(b.Size) != len(raw) {
		return nil, kafkalog.Corruptf(0, "entry size %d but %d bytes given", b.Size, len(raw))
	}
	if b.Magic == 2 {
		return v2Records(b, raw, dec)
	}
	return legacyRecords(b, raw, dec)
}

func payload(c Codec, src []byte, dec Decompressor) ([]byte, error) {
	if c == CodecNone {
		return src, nil
	}
	if dec == nil {
		return nil, fmt.Errorf("%w: %s (no decompressor)", ErrUnsupportedCodec, c)
	}
	out, err := dec.Decompress(c, src, DecompressLimit(len(src)))
	if err != nil {
		return nil, fmt.Errorf("decompress %s payload: %w", c, err)
	}
	return out, nil
}

func v2Records(b Batch, raw []byte, dec Decompressor) ([]Record, error) {
	data, err := payload(b.Codec, raw[HeaderSize:], dec)
	if err != nil {
		return nil, err
	}
	// Each record takes at least 7 bytes, which bounds the preallocation.
	recs := make([]Record, 0, min(int(b.Count), len(data)/7, 4096))
	r := reader{buf: data}
	for i := int32(0); i < b.Count; i++ {
		start := r.pos
		length := r.varint()
		if r.bad || length < 0 || int(length) > len(r.buf)-r.pos {
			return nil, kafkalog.Corruptf(recordPos(b, start), "record %d: bad length %d", i, length)
		}
		end := r.pos + int(length)
		rec := r.record(b, end)
		if r.bad || r.pos != end {
			return nil, kafkalog.Corruptf(recordPos(b, start), "record %d: malformed", i)
		}
		recs = append(recs, rec)
	}
	if r.pos != len(r.buf) {
		return nil, kafkalog.Corruptf(recordPos(b, r.pos), "%d bytes after %d records", len(r.buf)-r.pos, b.Count)
	}
	return recs, nil
}

// recordPos gives an error position: exact for uncompressed batches, the
// start of the payload for compressed ones.
func recordPos(b Batch, off int) int64 {
	if b.Codec != CodecNone {
		return HeaderSize
	}
	return int64(HeaderSize + off)
}

func legacyRecords(b Batch, raw []byte, dec Decompressor) ([]Record, error) {
	key, value, ts := legacyFields(raw)
	if b.Codec == CodecNone {
		return []Record{{Offset: b.LastOffset, Timestamp: ts, Key: key, Value: value}}, nil
	}
	inner, err := payload(b.Codec, value, dec)
	if err != nil {
		return nil, err
	}
	var recs []Record
	for pos := 0; pos < len(inner); {
		ib, err := ParseHeader(inner[pos:], int64(pos))
		if err != nil {
			return nil, fmt.Errorf("inner message of wrapper at offset %d: %w", b.LastOffset, err)
		}
		if ib.Magic != b.Magic || ib.Codec != CodecNone {
			return nil, kafkalog.Corruptf(b.Position, "wrapper at offset %d holds magic %d codec %s message", b.LastOffset, ib.Magic, ib.Codec)
		}
		k, v, its := legacyFields(inner[pos : pos+int(ib.Size)])
		if b.TimestampType == LogAppendTime {
			its = ts
		}
		recs = append(recs, Record{Offset: ib.LastOffset, Timestamp: its, Key: k, Value: v})
		pos += int(ib.Size)
	}
	if len(recs) == 0 {
		return nil, kafkalog.Corruptf(b.Position, "empty compressed wrapper at offset %d", b.LastOffset)
	}
	if b.Magic == 1 {
		// Inner offsets are relative; the wrapper holds the last absolute one.
		base := b.LastOffset - recs[len(recs)-1].Offset
		for i := range recs {
			recs[i].Offset += base
		}
	}
	return recs, nil
}

// legacyFields returns key, value and timestamp of a message that
// ParseHeader has already validated.
func legacyFields(msg []byte) (key, value []byte, ts int64) {
	ts = NoTimestamp
	p := 18
	if msg[16] == 1 {
		ts = int64(binary.BigEndian.Uint64(msg[18:]))
		p = 26
	}
	field := func() []byte {
		n := int32(binary.BigEndian.Uint32(msg[p:]))
		p += 4
		if n < 0 {
			return nil
		}
		v := msg[p : p+int(n)]
		p += int(n)
		return v
	}
	key = field()
	value = field()
	return key, value, ts
}

// InspectWrapper completes a legacy compressed wrapper's Batch (raw is
// the whole entry) with its first offset, record count and first
// timestamp, walking the inner messages without keeping them. It does
// nothing for other entries.
func (b *Batch) InspectWrapper(raw []byte, dec Decompressor) error {
	if b.Magic == 2 || b.Codec == CodecNone {
		return nil
	}
	_, value, _ := legacyFields(raw)
	inner, err := payload(b.Codec, value, dec)
	if err != nil {
		return err
	}
	var first, last, firstTS int64
	n := int32(0)
	for pos := 0; pos < len(inner); n++ {
		ib, err := ParseHeader(inner[pos:], int64(pos))
		if err != nil {
			return fmt.Errorf("inner message of wrapper at offset %d: %w", b.LastOffset, err)
		}
		if n == 0 {
			first = ib.LastOffset
			firstTS = ib.MaxTimestamp
			if b.TimestampType == LogAppendTime {
				firstTS = b.MaxTimestamp
			}
		}
		last = ib.LastOffset
		pos += int(ib.Size)
	}
	if n == 0 {
		return kafkalog.Corruptf(b.Position, "empty compressed wrapper at offset %d", b.LastOffset)
	}
	if b.Magic == 1 {
		first += b.LastOffset - last
	}
	b.BaseOffset, b.Count, b.FirstTimestamp = first, n, firstTS
	return nil
}
