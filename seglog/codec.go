package seglog

import (
	"fmt"
	"slices"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// Compression types of compression.type, with Kafka's names
// (TopicConfig.COMPRESSION_TYPE_CONFIG, BrokerCompressionType).
const (
	// CompressionProducer keeps the codec the caller (the producer) gave.
	CompressionProducer = "producer"
	// CompressionUncompressed writes every data batch uncompressed.
	CompressionUncompressed = "uncompressed"
	CompressionGzip         = "gzip"
	CompressionSnappy       = "snappy"
	CompressionLZ4          = "lz4"
	CompressionZstd         = "zstd"
)

// Timestamp types of message.timestamp.type, with Kafka's names
// (TopicConfig.MESSAGE_TIMESTAMP_TYPE_CONFIG).
const (
	// TimestampCreateTime keeps the records' own (producer) timestamps.
	TimestampCreateTime = "CreateTime"
	// TimestampLogAppendTime stamps every batch with the time the log
	// appended it.
	TimestampLogAppendTime = "LogAppendTime"
)

// compressionTypes maps each compression.type to the batch codec it
// forces; producer maps to -1 (keep the caller's).
var compressionTypes = map[string]batch.Codec{
	CompressionProducer:     -1,
	CompressionUncompressed: batch.CodecNone,
	CompressionGzip:         batch.CodecGzip,
	CompressionSnappy:       batch.CodecSnappy,
	CompressionLZ4:          batch.CodecLZ4,
	CompressionZstd:         batch.CodecZstd,
}

// CompressionTypes lists compression.type's accepted values, Kafka's order.
var CompressionTypes = []string{CompressionUncompressed, CompressionZstd, CompressionLZ4, CompressionSnappy, CompressionGzip, CompressionProducer}

// validateCodecs reports invalid compression.type, compression levels
// and message.timestamp.type values. Kafka compares both case-sensitively
// (ConfigDef.ValidString), and so does this; the empty string stands for
// the default.
func (c Config) validateCodecs() []error {
	var errs []error
	if _, ok := compressionTypes[c.CompressionType]; !ok && c.CompressionType != "" {
		errs = append(errs, fmt.Errorf("compression.type %q: want one of %v", c.CompressionType, CompressionTypes))
	}
	errs = append(errs, c.levels().Validate()...)
	if !slices.Contains([]string{"", TimestampCreateTime, TimestampLogAppendTime}, c.MessageTimestampType) {
		errs = append(errs, fmt.Errorf("message.timestamp.type %q: want %s or %s", c.MessageTimestampType, TimestampCreateTime, TimestampLogAppendTime))
	}
	return errs
}

// batchCodec returns the codec a batch the caller asked to write with
// codec asked is written with: the topic's compression.type, or asked
// when that is producer. As Kafka's LogValidator does, a control batch
// given uncompressed stays uncompressed whatever the topic's codec.
func (c Config) batchCodec(asked batch.Codec, control bool) batch.Codec {
	forced, ok := compressionTypes[c.CompressionType]
	if !ok || forced < 0 || (control && asked == batch.CodecNone) {
		return asked
	}
	return forced
}

// logAppendTime reports whether message.timestamp.type is LogAppendTime.
func (c Config) logAppendTime() bool { return c.MessageTimestampType == TimestampLogAppendTime }

// levels returns the compression.*.level settings.
func (c Config) levels() codec.Levels {
	return codec.Levels{Gzip: c.CompressionGzipLevel, LZ4: c.CompressionLZ4Level, Zstd: c.CompressionZstdLevel}
}
