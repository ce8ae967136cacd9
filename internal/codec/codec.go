// Package codec compresses and decompresses Kafka batch payloads with every
// codec Kafka defines, for the format packages that use only the standard
// library (it implements batch.Compressor and batch.Decompressor).
//
// Wire formats, as the Java client and broker write them:
//   - gzip: a gzip stream (RFC 1952).
//   - snappy: xerial-snappy framing, a 16-byte header ("\x82SNAPPY\x00",
//     int32 version 1, int32 compatible version 1) then blocks of
//     int32 big-endian length + one snappy block. A payload without the
//     header is read as one raw snappy block (librdkafka, sarama).
//   - lz4: an LZ4 frame (magic 0x184D2204). Magic 0 messages from brokers
//     before 0.10 carry a wrong frame header checksum (KAFKA-3160) and are
//     not supported.
//   - zstd: a zstd frame (Kafka 2.1+, KIP-110).
//
// Decompression stops with an error as soon as the output would exceed the
// caller's limit, so a small payload cannot claim unbounded memory.
package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// Kafka is a batch.Compressor and batch.Decompressor for all of Kafka's
// codecs. It is safe for concurrent use.
var Kafka = &kafkaCodec{}

type kafkaCodec struct {
	zencOnce sync.Once
	zenc     *zstd.Encoder
	zencErr  error
}

var zstdDecoders sync.Pool

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderLen = 16
	xerialBlock     = 32 << 10 // block size of the Java SnappyOutputStream
)

// Decompress implements batch.Decompressor.
func (k *kafkaCodec) Decompress(c batch.Codec, src []byte, max int) ([]byte, error) {
	switch c {
	case batch.CodecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return batch.ReadLimited(zr, max)
	case batch.CodecSnappy:
		return snappyDecode(src, max)
	case batch.CodecLZ4:
		return batch.ReadLimited(lz4.NewReader(bytes.NewReader(src)), max)
	case batch.CodecZstd:
		// A streaming read stops at max whatever the frame header claims.
		d, _ := zstdDecoders.Get().(*zstd.Decoder)
		if d == nil {
			var err error
			if d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true)); err != nil {
				return nil, fmt.Errorf("zstd: %w", err)
			}
		}
		defer zstdDecoders.Put(d)
		if err := d.Reset(bytes.NewReader(src)); err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		out, err := batch.ReadLimited(d, max)
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %s", batch.ErrUnsupportedCodec, c)
}

func snappyDecode(src []byte, max int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlock(nil, src, max)
	}
	if len(src) < xerialHeaderLen {
		return nil, errors.New("snappy: truncated xerial header")
	}
	var out []byte
	for p := xerialHeaderLen; p < len(src); {
		if len(src)-p < 4 {
			return nil, errors.New("snappy: truncated xerial block length")
		}
		n := int(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n < 0 || n > len(src)-p {
			return nil, fmt.Errorf("snappy: xerial block length %d exceeds %d remaining bytes", n, len(src)-p)
		}
		var err error
		if out, err = snappyBlock(out, src[p:p+n], max-len(out)); err != nil {
			return nil, err
		}
		p += n
	}
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to dst.
func snappyBlock(dst, block []byte, max int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > max {
		return nil, fmt.Errorf("snappy: block decodes to %d bytes, over the %d byte limit", n, max)
	}
	dec, err := s2.Decode(nil, block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	return append(dst, dec...), nil
}

// Compress implements batch.Compressor.
func (k *kafkaCodec) Compress(c batch.Codec, dst, src []byte) ([]byte, error) {
	switch c {
	case batch.CodecGzip:
		buf := bytes.NewBuffer(dst)
		zw := gzip.NewWriter(buf)
		return closeWriter(buf, zw, src)
	case batch.CodecSnappy:
		dst = append(dst, xerialMagic...)
		dst = binary.BigEndian.AppendUint32(dst, 1)
		dst = binary.BigEndian.AppendUint32(dst, 1)
		for p := 0; p < len(src); p += xerialBlock {
			blk := snappy.Encode(nil, src[p:min(p+xerialBlock, len(src))])
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(blk)))
			dst = append(dst, blk...)
		}
		return dst, nil
	case batch.CodecLZ4:
		buf := bytes.NewBuffer(dst)
		return closeWriter(buf, lz4.NewWriter(buf), src)
	case batch.CodecZstd:
		k.zencOnce.Do(func() { k.zenc, k.zencErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)) })
		if k.zencErr != nil {
			return nil, k.zencErr
		}
		return k.zenc.EncodeAll(src, dst), nil
	}
	return nil, fmt.Errorf("%w: %s", batch.ErrUnsupportedCodec, c)
}

func closeWriter(buf *bytes.Buffer, w io.WriteCloser, src []byte) ([]byte, error) {
	if _, err := w.Write(src); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
