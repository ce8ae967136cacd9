package main

import (
	"encoding/json"
	"os"
	"sort"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/kafkalog/snapshot"
)

// offsetCheckpointFiles are the log dir files in the offset checkpoint
// format "tierd dump" reads.
var offsetCheckpointFiles = map[string]bool{
	kafkalog.ReplicationOffsetCheckpointFile: true, kafkalog.LogStartOffsetCheckpointFile: true,
	checkpoint.RecoveryPointFile: true, checkpoint.CleanerOffsetFile: true,
}

// snapshotLine is one producer of a .snapshot, with the names
// kafka-dump-log.sh prints.
type snapshotLine struct {
	ProducerID            int64 `json:"producerId"`
	ProducerEpoch         int16 `json:"producerEpoch"`
	CoordinatorEpoch      int32 `json:"coordinatorEpoch"`
	CurrentTxnFirstOffset int64 `json:"currentTxnFirstOffset"`
	FirstSequence         int32 `json:"firstSequence"`
	LastSequence          int32 `json:"lastSequence"`
	LastOffset            int64 `json:"lastOffset"`
	OffsetDelta           int32 `json:"offsetDelta"`
	Timestamp             int64 `json:"timestamp"`
}

// checkpointLine is one partition of an offset checkpoint.
type checkpointLine struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// dumpSnapshot prints a producer state snapshot's entries; a CRC that
// does not match prints them and then fails.
func dumpSnapshot(enc *json.Encoder, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	entries, perr := snapshot.Parse(data)
	for _, e := range entries {
		line := snapshotLine{ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch, CoordinatorEpoch: e.CoordinatorEpoch,
			CurrentTxnFirstOffset: e.CurrentTxnFirstOffset, FirstSequence: e.FirstSequence(), LastSequence: e.LastSequence,
			LastOffset: e.LastOffset, OffsetDelta: e.OffsetDelta, Timestamp: e.Timestamp}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return kafkalog.WithFile(perr, path)
}

// dumpCheckpoint prints an offset checkpoint's entries by topic and
// partition.
func dumpCheckpoint(enc *json.Encoder, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	m, err := checkpoint.Parse(data)
	if err != nil {
		return kafkalog.WithFile(err, path)
	}
	lines := make([]checkpointLine, 0, len(m))
	for tp, off := range m {
		lines = append(lines, checkpointLine{tp.Topic, tp.Partition, off})
	}
	sort.Slice(lines, func(i, j int) bool {
		if lines[i].Topic != lines[j].Topic {
			return lines[i].Topic < lines[j].Topic
		}
		return lines[i].Partition < lines[j].Partition
	})
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}
