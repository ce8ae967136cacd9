// Package checkpoint reads a log directory's offset checkpoint files:
// replication-offset-checkpoint (high watermarks), log-start-offset-checkpoint,
// recovery-point-offset-checkpoint and cleaner-offset-checkpoint.
//
// # Format
//
// Text, '\n'-separated: a version line (0), a count line, then one line per
// partition, "topic partition offset":
//
//	0
//	2
//	orders 0 600
//	__consumer_offsets 36 15
//
// An empty file means no entries. Source: Apache Kafka CheckpointFile.java,
// OffsetCheckpointFile.java.
package checkpoint

import (
	"os"
	"strconv"
	"strings"

	"github.com/tierd/tierd/internal/kafkalog"
)

// Names of the two offset checkpoint files of a log dir that kafkalog does
// not name (kafkalog.ReplicationOffsetCheckpointFile and
// kafkalog.LogStartOffsetCheckpointFile are the others); all four have
// this format. Source: Apache Kafka LogManager (RecoveryPointCheckpointFile)
// and LogCleanerManager (offsetCheckpointFile).
const (
	RecoveryPointFile = "recovery-point-offset-checkpoint"
	CleanerOffsetFile = "cleaner-offset-checkpoint"
)

// Parse decodes an offset checkpoint. Errors are *kafkalog.CorruptionError
// with the byte position of the bad line.
func Parse(data []byte) (map[kafkalog.TopicPartition]int64, error) {
	out := map[kafkalog.TopicPartition]int64{}
	if len(data) == 0 {
		return out, nil
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	pos, at := make([]int64, len(lines)), int64(0)
	for i, l := range lines {
		pos[i] = at
		at += int64(len(l) + 1)
	}
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, kafkalog.Corruptf(0, "unsupported offset checkpoint version %q", lines[0])
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n != len(lines)-2 {
		return nil, kafkalog.Corruptf(pos[1], "entry count %q does not match %d entry lines", lines[1], len(lines)-2)
	}
	for i, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, kafkalog.Corruptf(pos[i+2], "entry %q: want \"topic partition offset\"", l)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 {
			return nil, kafkalog.Corruptf(pos[i+2], "entry %q: bad number", l)
		}
		out[kafkalog.TopicPartition{Topic: f[0], Partition: int32(p)}] = off
	}
	return out, nil
}

// ReadFile reads and parses a checkpoint file. A missing file returns nil
// and no error, so callers can tell "no file" (nil) from "no entries".
func ReadFile(path string) (map[kafkalog.TopicPartition]int64, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := Parse(data)
	return m, kafkalog.WithFile(err, path)
}
