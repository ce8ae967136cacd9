package codec

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// Levels are compression levels with the meaning and ranges of Kafka's
// topic settings compression.gzip.level, compression.lz4.level and
// compression.zstd.level (KIP-390; Kafka's CompressionType).
type Levels struct {
	// Gzip is 1 (fastest) to 9 (smallest), or -1 for zlib's default
	// (level 6, java.util.zip.Deflater.DEFAULT_COMPRESSION). Kafka's
	// default: -1.
	Gzip int
	// LZ4 is 1 to 17. Kafka's default, 9, uses LZ4's fast compressor;
	// every other level LZ4 HC at that level (Lz4BlockOutputStream).
	// Here HC levels above 9 compress as 9, pierrec/lz4's deepest.
	LZ4 int
	// Zstd is -131072 to 22. Kafka's default: 3. The Go encoder has four
	// speeds, chosen by zstd.EncoderLevelFromZstd: below 3 fastest, 3-5
	// default, 6-9 better, 10 and up best.
	Zstd int
}

// Level ranges, Kafka's (CompressionType.GZIP/LZ4/ZSTD min and max).
const (
	GzipDefaultLevel = -1
	GzipMinLevel     = 1
	GzipMaxLevel     = 9
	LZ4MinLevel      = 1
	LZ4MaxLevel      = 17
	LZ4DefaultLevel  = 9
	ZstdMinLevel     = -131072
	ZstdMaxLevel     = 22
	ZstdDefaultLevel = 3
)

// DefaultLevels returns Kafka's default levels.
func DefaultLevels() Levels {
	return Levels{Gzip: GzipDefaultLevel, LZ4: LZ4DefaultLevel, Zstd: ZstdDefaultLevel}
}

// Validate reports each level outside Kafka's range, naming the setting.
func (l Levels) Validate() []error {
	var errs []error
	if l.Gzip != GzipDefaultLevel && (l.Gzip < GzipMinLevel || l.Gzip > GzipMaxLevel) {
		errs = append(errs, fmt.Errorf("compression.gzip.level %d: want %d to %d, or %d (zlib's default)", l.Gzip, GzipMinLevel, GzipMaxLevel, GzipDefaultLevel))
	}
	if l.LZ4 < LZ4MinLevel || l.LZ4 > LZ4MaxLevel {
		errs = append(errs, fmt.Errorf("compression.lz4.level %d: want %d to %d", l.LZ4, LZ4MinLevel, LZ4MaxLevel))
	}
	if l.Zstd < ZstdMinLevel || l.Zstd > ZstdMaxLevel {
		errs = append(errs, fmt.Errorf("compression.zstd.level %d: want %d to %d", l.Zstd, ZstdMinLevel, ZstdMaxLevel))
	}
	return errs
}

// NewCompressor returns a batch.Compressor writing Kafka's framing (as
// Kafka.Compress does) at levels l, which must be valid (Levels.Validate).
// It is safe for concurrent use.
func NewCompressor(l Levels) (batch.Compressor, error) {
	if errs := l.Validate(); len(errs) > 0 {
		return nil, errs[0]
	}
	gz := l.Gzip
	if gz == GzipDefaultLevel {
		gz = 6 // zlib's Z_DEFAULT_COMPRESSION; klauspost's own default is 5
	}
	lz := lz4.Fast
	if l.LZ4 != LZ4DefaultLevel {
		lz = []lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}[min(l.LZ4, 9)-1]
	}
	return &leveled{gzip: gz, lz4: lz, zstd: zstd.EncoderLevelFromZstd(l.Zstd)}, nil
}

type leveled struct {
	gzip int
	lz4  lz4.CompressionLevel
	zstd zstd.EncoderLevel

	zencOnce sync.Once
	zenc     *zstd.Encoder
	zencErr  error
}

// Compress implements batch.Compressor.
func (c *leveled) Compress(k batch.Codec, dst, src []byte) ([]byte, error) {
	switch k {
	case batch.CodecGzip:
		buf := bytes.NewBuffer(dst)
		zw, err := gzip.NewWriterLevel(buf, c.gzip)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return closeWriter(buf, zw, src)
	case batch.CodecLZ4:
		buf := bytes.NewBuffer(dst)
		zw := lz4.NewWriter(buf)
		if err := zw.Apply(lz4.CompressionLevelOption(c.lz4)); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return closeWriter(buf, zw, src)
	case batch.CodecZstd:
		c.zencOnce.Do(func() {
			c.zenc, c.zencErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(c.zstd))
		})
		if c.zencErr != nil {
			return nil, c.zencErr
		}
		return c.zenc.EncodeAll(src, dst), nil
	}
	return Kafka.Compress(k, dst, src)
}
