package kafkalog

import (
	"encoding/base64"
	"errors"
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
	if err != nil || ValidateTopicName(topic) != nil {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: topic, Partition: int32(p)}, true
}

// ValidateTopicName applies Kafka's rule for a topic name
// (Topic.validate): 1 to 249 characters, each an ASCII letter or digit,
// '.', '_' or '-', and not "." or "..". The error says which part of the
// rule the name breaks, in Kafka's words.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is illegal, it can't be empty")
	case name == "." || name == "..":
		return errors.New(`topic name cannot be "." or ".."`)
	case len(name) > maxTopicLen:
		return fmt.Errorf("topic name is illegal, it can't be longer than %d characters (it has %d)", maxTopicLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c == '.' || c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return fmt.Errorf("topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

// PartitionMetadataFile is the per-partition file holding the topic id.
const PartitionMetadataFile = "partition.metadata"

// ErrBadPartitionMetadata marks a partition.metadata file that is not what
// a broker writes. tierd treats such a file as a reason to stop and wait,
// never as evidence about the topic.
var ErrBadPartitionMetadata = errors.New("kafkalog: bad partition.metadata")

// ReadTopicID returns the topic id in a partition directory's
// partition.metadata, or "" when the file does not exist (brokers before
// 2.8, or logs written by tierd's own segment log). It checks the file as
// Kafka's PartitionMetadataFile reader does (KIP-516): exactly two lines,
// "version: 0" and "topic_id: <id>", where the id is a Uuid printed as
// 22 characters of URL-safe base64 without padding (16 bytes), and not the
// all-zero Uuid Kafka reserves for "no id". An unreadable, empty,
// truncated or otherwise different file returns an error wrapping
// ErrBadPartitionMetadata (or the read error) that names the file.
func ReadTopicID(partitionDir string) (string, error) {
	path := filepath.Join(partitionDir, PartitionMetadataFile)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	id, err := ParsePartitionMetadata(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return id, nil
}

// ParsePartitionMetadata parses the bytes of a partition.metadata file
// (see ReadTopicID) and returns the topic id. Errors wrap
// ErrBadPartitionMetadata and say which rule failed.
func ParsePartitionMetadata(data []byte) (string, error) {
	text := strings.TrimSuffix(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	lines := strings.Split(text, "\n")
	if len(text) == 0 {
		return "", fmt.Errorf("%w: the file is empty", ErrBadPartitionMetadata)
	}
	if len(lines) != 2 {
		return "", fmt.Errorf("%w: %d lines, want 2 (version and topic_id)", ErrBadPartitionMetadata, len(lines))
	}
	field := func(line, name string) (string, error) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != name || len(v) < 2 || (v[0] != ' ' && v[0] != '\t') {
			return "", fmt.Errorf("%w: line %q, want %q", ErrBadPartitionMetadata, line, name+": <value>")
		}
		return strings.TrimSpace(v), nil
	}
	v, err := field(lines[0], "version")
	if err != nil {
		return "", err
	}
	if v != "0" {
		return "", fmt.Errorf("%w: version %q, want 0", ErrBadPartitionMetadata, v)
	}
	id, err := field(lines[1], "topic_id")
	if err != nil {
		return "", err
	}
	if _, err := ParseTopicID(id); err != nil {
		return "", err
	}
	return id, nil
}

// topicIDEncoding is Kafka's Uuid.toString: URL-safe base64 without
// padding; strict, so each id has one spelling.
var topicIDEncoding = base64.RawURLEncoding.Strict()

// ParseTopicID parses a topic id as Kafka prints a Uuid (KIP-516): exactly
// 22 characters of URL-safe base64 without padding, 16 bytes, and not the
// all-zero Uuid Kafka reserves for "no id". Errors wrap
// ErrBadPartitionMetadata.
func ParseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	if len(s) != 22 {
		return id, fmt.Errorf("%w: topic id %q has %d characters, want 22", ErrBadPartitionMetadata, s, len(s))
	}
	if n, err := topicIDEncoding.Decode(id[:], []byte(s)); err != nil || n != len(id) {
		return [16]byte{}, fmt.Errorf("%w: topic id %q is not URL-safe base64 of 16 bytes", ErrBadPartitionMetadata, s)
	}
	if id == ([16]byte{}) {
		return id, fmt.Errorf("%w: topic id %q is the all-zero Uuid", ErrBadPartitionMetadata, s)
	}
	return id, nil
}

// ParseDeletedPartitionDir parses the name a broker gives a partition
// directory it is about to delete, or that is not the partition's live
// log: "<topic>-<partition>.<uuid>-delete" (topic deleted, replica
// removed or reassigned away, or the source of a move between log dirs),
// "-future" (the target of a move between log dirs, KIP-113) and "-stray"
// (a replica the controller no longer assigns here, KIP-858). It returns
// the partition and the kind ("delete", "future" or "stray"). Such a
// directory says nothing certain about the topic: each kind has several
// causes.
func ParseDeletedPartitionDir(name string) (TopicPartition, bool) {
	tp, _, ok := ParseNonLivePartitionDir(name)
	return tp, ok
}

// ParseNonLivePartitionDir is ParseDeletedPartitionDir with the kind.
func ParseNonLivePartitionDir(name string) (tp TopicPartition, kind string, ok bool) {
	dash := strings.LastIndexByte(name, '-')
	if dash < 0 {
		return TopicPartition{}, "", false
	}
	rest, kind := name[:dash], name[dash+1:]
	if kind != "delete" && kind != "future" && kind != "stray" {
		return TopicPartition{}, "", false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 || len(rest)-dot-1 != 32 {
		return TopicPartition{}, "", false
	}
	tp, ok = ParsePartitionDir(rest[:dot])
	return tp, kind, ok
}
