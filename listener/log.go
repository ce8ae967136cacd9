package listener

import (
	"context"
	"errors"
	"fmt"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Isolation is a Fetch or ListOffsets request's isolation level (KIP-98):
// what a consumer may see.
type Isolation int8

// Isolation levels, with Kafka's wire values.
const (
	// ReadUncommitted reads up to the high watermark, aborted records
	// included.
	ReadUncommitted Isolation = 0
	// ReadCommitted reads up to the last stable offset, with the aborted
	// transactions of the range so the client can drop their records.
	ReadCommitted Isolation = 1
)

// Log is what the listener serves: every partition tierd can read, each
// one log across the remote and local tiers. The listener owns this
// interface; package logview implements it over tierd's remote fetch path
// and the local log dirs. Implementations are safe for concurrent use.
type Log interface {
	// Topics returns every topic with at least one readable partition.
	Topics(ctx context.Context) ([]Topic, error)
	// Offsets returns a partition's offsets now. Errors: ErrUnknownPartition
	// (wrapped) when tierd holds nothing of it; others are I/O failures.
	Offsets(ctx context.Context, tp TopicPartition) (Offsets, error)
	// Read returns whole record batches (v2 or legacy message sets), byte
	// for byte as stored, starting with the batch whose last offset is >=
	// offset (an offset in a compacted gap reads from the next batch): that
	// batch always, even when larger than maxBytes (bytes), then following
	// batches while the total stays within maxBytes. It never returns a
	// batch at or past the high watermark, nor, with ReadCommitted, at or
	// past the last stable offset. Reading at that bound returns no
	// records and no error. With ReadCommitted, Aborted lists every
	// aborted transaction (from the segments' .txnindex, local and tiered)
	// whose range overlaps [offset, the end of the returned records).
	//
	// Errors (wrapped): ErrUnknownPartition; *OffsetOutOfRangeError below
	// the log start offset or past the high watermark; ErrUnavailable when
	// the object store did not answer in time (retryable); ErrDataLoss when
	// stored data that must exist is missing or corrupt; ctx's error.
	Read(ctx context.Context, tp TopicPartition, offset int64, maxBytes int, iso Isolation) (ReadResult, error)
	// OffsetForTimestamp returns the first offset at or after the log start
	// offset whose record timestamp is >= ts (ms), and that timestamp;
	// found is false when no record has one (Kafka then answers offset
	// -1). Errors as Read.
	OffsetForTimestamp(ctx context.Context, tp TopicPartition, ts int64, iso Isolation) (off TimestampOffset, found bool, err error)
	// MaxTimestamp returns the offset and timestamp (ms) of the record
	// with the largest timestamp in the log from the log start offset to
	// the high watermark (ListOffsets MAX_TIMESTAMP, KIP-734); the first
	// such record when several share it. found is false when no record
	// has a timestamp, or when that record is at or past iso's end (with
	// ReadCommitted, in a transaction still open): Kafka then answers -1,
	// never the largest timestamp below that end. Errors as Read.
	MaxTimestamp(ctx context.Context, tp TopicPartition, iso Isolation) (off TimestampOffset, found bool, err error)
	// LeaderEpochs returns the partition's leader-epoch lineage (the local
	// leader-epoch-checkpoint merged with the epochs recorded in the
	// copies' metadata), ascending by epoch and start offset. It may start
	// before the log start offset; the listener trims it there as Kafka's
	// LeaderEpochFileCache.truncateFromStart does. Errors as Offsets.
	LeaderEpochs(ctx context.Context, tp TopicPartition) ([]EpochEntry, error)
}

// Topic is one topic as Metadata shows it.
type Topic struct {
	Name string
	// ID is the topic id (KIP-516) from partition.metadata or the copies'
	// metadata, or one derived from the name when neither has one (see
	// logview); never all zero, and never another topic's (Fetch v13+
	// reads the topic its id names).
	ID [16]byte
	// Partitions are the partition numbers tierd can read, ascending.
	Partitions []int32
	// Internal is set for Kafka's internal topics (__consumer_offsets,
	// __transaction_state).
	Internal bool
}

// Offsets are a partition's offsets as a reader sees them.
type Offsets struct {
	// LogStartOffset is the first offset of the whole log, remote and
	// local.
	LogStartOffset int64
	// LocalLogStartOffset is the first offset on local disk (the base
	// offset of the oldest local segment, which may lie below
	// LogStartOffset); equal to HighWatermark when no local segment holds
	// data.
	LocalLogStartOffset int64
	// HighestTieredOffset is the last offset with a finished remote copy,
	// or -1 when nothing is tiered.
	HighestTieredOffset int64
	// HighWatermark is the offset after the last batch tierd serves: the
	// broker's high watermark from replication-offset-checkpoint for a
	// broker-owned log dir, else the end of the last whole batch.
	HighWatermark int64
	// LastStableOffset is the first offset of the oldest transaction still
	// open, or HighWatermark when none is (KIP-98).
	LastStableOffset int64
	// LeaderEpoch is the latest leader epoch of the lineage, -1 when there
	// is none.
	LeaderEpoch int32
}

// ReadResult is what Read returns.
type ReadResult struct {
	// Records are whole batches as stored; empty at the bound.
	Records []byte
	// Aborted are the aborted transactions overlapping the records, by
	// first offset (ReadCommitted only).
	Aborted []AbortedTxn
	// Offsets are the partition's offsets as of the read.
	Offsets Offsets
}

// AbortedTxn is one aborted transaction as a Fetch response lists it.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// TimestampOffset is an offset and its record's timestamp (ms).
type TimestampOffset struct {
	Offset    int64
	Timestamp int64
}

// EpochEntry is one leader epoch and the first offset written under it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// Error classes a Log returns (wrapped); the listener maps them to Kafka
// error codes, and is the only place that does.
var (
	// ErrUnknownPartition: tierd holds nothing of the partition.
	ErrUnknownPartition = errors.New("listener: unknown topic or partition")
	// ErrUnavailable: the object store (or a disk) did not answer; the
	// client retries.
	ErrUnavailable = errors.New("listener: storage unavailable")
	// ErrDataLoss: data that must exist is missing or corrupt (a finished
	// copy's object is gone, offsets no copy and no local segment covers).
	ErrDataLoss = errors.New("listener: data loss")
)

// OffsetOutOfRangeError is a read outside [LogStartOffset, HighWatermark].
type OffsetOutOfRangeError struct {
	Offset, LogStartOffset, HighWatermark int64
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("listener: offset %d out of range [%d, %d]", e.Offset, e.LogStartOffset, e.HighWatermark)
}
