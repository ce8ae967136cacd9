package kafkalog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Segment file suffixes, as a broker writes them.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	TxnIndexSuffix  = ".txnindex"
	SnapshotSuffix  = ".snapshot"

	// Suffixes appended to a segment file that is no longer live.
	DeletedSuffix = ".deleted"
	CleanedSuffix = ".cleaned"
	SwapSuffix    = ".swap"

	// LeaderEpochCheckpointFile is the per-partition epoch file name.
	LeaderEpochCheckpointFile = "leader-epoch-checkpoint"
	// ReplicationOffsetCheckpointFile is the per-log-dir high watermark file.
	ReplicationOffsetCheckpointFile = "replication-offset-checkpoint"
	// LogStartOffsetCheckpointFile is the per-log-dir log start offset file.
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
)

// offsetDigits is the width of the zero-padded offset in a file name.
const offsetDigits = 20

// FileName returns the name of a segment file: the 20-digit zero-padded base
// offset followed by suffix (one of the *Suffix constants), e.g.
// FileName(206, LogSuffix) = "00000000000000000206.log". A negative offset
// is a programming error and panics.
func FileName(baseOffset int64, suffix string) string {
	if baseOffset < 0 {
		panic(fmt.Sprintf("kafkalog: negative base offset %d", baseOffset))
	}
	return fmt.Sprintf("%020d%s", baseOffset, suffix)
}

// SegmentFile is a parsed segment file name.
type SegmentFile struct {
	// BaseOffset is the offset in the name (for a snapshot, the offset the
	// producer state was taken at).
	BaseOffset int64
	// Suffix is the kind of file: LogSuffix, IndexSuffix, TimeIndexSuffix,
	// TxnIndexSuffix or SnapshotSuffix.
	Suffix string
	// Live is false when the name carries a ".deleted", ".cleaned" or
	// ".swap" suffix after Suffix: such files are not part of the log.
	Live bool
	// Pending is the non-live suffix ("" when Live).
	Pending string
}

// ParseFileName parses a segment file name such as
// "00000000000000000206.log" or "00000000000000000206.log.deleted". It
// returns ok false for any other name (checkpoint files, partition.metadata,
// names with a wrong digit count).
func ParseFileName(name string) (f SegmentFile, ok bool) {
	f.Live = true
	for _, p := range []string{DeletedSuffix, CleanedSuffix, SwapSuffix} {
		if strings.HasSuffix(name, p) {
			name = strings.TrimSuffix(name, p)
			f.Live, f.Pending = false, p
			break
		}
	}
	dot := strings.IndexByte(name, '.')
	if dot != offsetDigits {
		return SegmentFile{}, false
	}
	switch suffix := name[dot:]; suffix {
	case LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix, SnapshotSuffix:
		f.Suffix = suffix
	default:
		return SegmentFile{}, false
	}
	for _, c := range name[:dot] {
		if c < '0' || c > '9' {
			return SegmentFile{}, false
		}
	}
	off, err := strconv.ParseInt(name[:dot], 10, 64)
	if err != nil {
		return SegmentFile{}, false
	}
	f.BaseOffset = off
	return f, true
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "<topic>-<partition>", the partition directory name.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// maxTopicLen is Kafka's limit on topic name length (Topic.MAX_NAME_LENGTH).
const maxTopicLen = 249

// ParsePartitionDir parses a live partition directory name "<topic>-<partition>".
// It returns ok false for directories being deleted, moved or left as stray
// replicas ("<topic>-<partition>.<uuid>-delete", "-future", "-stray"), and
// for names whose topic is not a legal Kafka topic name (ASCII letters,
// digits, '.', '_', '-', at most 249 characters, not "." or "..").
func ParsePartitionDir(name string) (tp TopicPartition, ok bool) {
	dash := strings.LastIndexByte(name, '-')
	if dash <= 0 || dash == len(name)-1 {
		return TopicPartition{}, false
	}
	topic, num := name[:dash], name[dash+1:]
	for _, c := range num {
		if c < '0' || c > '9' {
			return TopicPartition{}, false // also rejects "-delete", "-future", "-stray"
		}
	}
	p, err := strconv.ParseInt(num, 10, 32)
	if err != nil || len(topic) > maxTopicLen || topic == "." || topic == ".." {
		return TopicPartition{}, false
	}
	for _, c := range topic {
		legal := c == '.' || c == '_' || c == '-' ||
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !legal {
			return TopicPartition{}, false
		}
	}
	return TopicPartition{Topic: topic, Partition: int32(p)}, true
}

// PartitionMetadataFile is the per-partition file holding the topic id.
const PartitionMetadataFile = "partition.metadata"

// ReadTopicID returns the topic id in a partition directory's
// partition.metadata ("version: 0\ntopic_id: <base64 uuid>\n", KIP-516),
// or "" when the file is missing (brokers before 2.8, or logs written by
// tierd's own segment log). A file without a topic_id line is an error.
func ReadTopicID(partitionDir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(partitionDir, PartitionMetadataFile))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "topic_id:"); ok {
			if id := strings.TrimSpace(v); id != "" {
				return id, nil
			}
		}
	}
	return "", fmt.Errorf("%s: no topic_id", filepath.Join(partitionDir, PartitionMetadataFile))
}

// ParseDeletedPartitionDir parses the name a broker gives a partition
// directory when its topic is deleted, "<topic>-<partition>.<uuid>-delete",
// and returns the partition.
func ParseDeletedPartitionDir(name string) (TopicPartition, bool) {
	rest, ok := strings.CutSuffix(name, "-delete")
	if !ok {
		return TopicPartition{}, false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 || len(rest)-dot-1 != 32 {
		return TopicPartition{}, false
	}
	return ParsePartitionDir(rest[:dot])
}
