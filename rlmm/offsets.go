package rlmm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/tierd/tierd/internal/remotelog"
)

// Partitions lists the partitions that have offsets recorded.
func (s *Store) Partitions() ([]remotelog.TopicPartition, error) {
	db, done := s.read()
	defer done()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{partitionTag}, UpperBound: []byte{partitionTag + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []remotelog.TopicPartition
	for it.First(); it.Valid(); it.Next() {
		tp, err := decodeTP(it.Key()[1:])
		if err != nil {
			return nil, err
		}
		out = append(out, tp)
	}
	return out, it.Error()
}

// Offsets returns a partition's offsets, and false when nothing is recorded
// for it (then the log start offset is 0 and nothing is tiered).
func (s *Store) Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	return s.offsets(tp)
}

func (s *Store) offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	db, done := s.read()
	defer done()
	return readOffsets(db, tp)
}

func readOffsets(r reader, tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	off := remotelog.PartitionOffsets{HighestTieredOffset: -1}
	v, err := getFrom(r, partitionKey(tp))
	if errors.Is(err, pebble.ErrNotFound) {
		return off, false, nil
	}
	if err != nil {
		return off, false, err
	}
	if err := json.Unmarshal(v, &off); err != nil {
		return off, false, fmt.Errorf("rlmm: decode offsets: %w", err)
	}
	return off, true, nil
}

// EnsurePartition records a partition first seen with its first local
// offset as log start offset; an existing record is left alone, with no
// write.
func (s *Store) EnsurePartition(tp remotelog.TopicPartition, logStartOffset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db().NewBatch()
	defer b.Close()
	off, err := s.ensurePartition(b, tp, logStartOffset)
	if err != nil || off == nil {
		return err
	}
	return s.commitChange(b, tp, &remotelog.Change{Offsets: off})
}

// ensurePartition adds to b the offsets of a partition that has none and
// returns them; nil when the partition has offsets.
func (s *Store) ensurePartition(b *pebble.Batch, tp remotelog.TopicPartition, lso int64) (*remotelog.PartitionOffsets, error) {
	_, ok, err := s.offsets(tp)
	if err != nil || ok {
		return nil, err
	}
	off := remotelog.PartitionOffsets{LogStartOffset: lso, HighestTieredOffset: -1, LocalLogStartOffset: lso}
	return &off, putJSON(b, partitionKey(tp), off)
}

// putOffsets writes a partition's offsets, synced, and records the
// change. Callers hold s.mu.
func (s *Store) putOffsets(tp remotelog.TopicPartition, off remotelog.PartitionOffsets) error {
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, partitionKey(tp), off); err != nil {
		return err
	}
	return s.commitChange(b, tp, &remotelog.Change{Offsets: &off})
}

// AdvanceOffsets raises the log start offset and the local log start offset
// of a partition to at least the given values (-1 leaves one unchanged);
// they never move back. The local log start offset is what is on local
// disk; it may lie below the log start offset while a broker's retention
// has not caught up. The write is synced, so callers may delete data
// below the new offsets once it returns; when neither offset moves, no
// write is made.
func (s *Store) AdvanceOffsets(tp remotelog.TopicPartition, logStart, localLogStart int64) (remotelog.PartitionOffsets, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok, err := s.offsets(tp)
	if err != nil {
		return old, err
	}
	off := old
	off.LogStartOffset = max(off.LogStartOffset, logStart)
	off.LocalLogStartOffset = max(off.LocalLogStartOffset, localLogStart)
	if ok && off == old {
		return off, nil
	}
	return off, s.putOffsets(tp, off)
}

// Snapshot returns a partition's offsets and the finished rows a reader
// should use (see FinishedSegments), as of one instant, so a reader never
// pairs a log start offset with rows from before or after a retention
// step. It reads every finished row; readers that keep a copy use
// PartitionVersion, ChangesSince and FinishedSnapshot instead.
func (s *Store) Snapshot(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, []remotelog.SegmentMetadata, error) {
	_, off, ok, rows, err := s.FinishedSnapshot(tp)
	if err != nil {
		return off, ok, nil, err
	}
	return off, ok, remotelog.Supersede(rows), nil
}

// SetTopicID records the topic id of a partition whose offsets have none;
// otherwise it makes no write.
func (s *Store) SetTopicID(tp remotelog.TopicPartition, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok, err := s.offsets(tp)
	if err != nil || !ok || off.TopicID != "" || id == "" {
		return err
	}
	off.TopicID = id
	return s.putOffsets(tp, off)
}

// ResetPartition starts a partition over, as a new incarnation of its topic
// (deleted and re-created): offsets from logStartOffset with nothing
// tiered, under the new topic id. The caller deletes the old incarnation's
// copies first. Offsets that are already exactly these are not written
// again.
func (s *Store) ResetPartition(tp remotelog.TopicPartition, logStartOffset int64, topicID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	off := remotelog.PartitionOffsets{TopicID: topicID, LogStartOffset: logStartOffset, HighestTieredOffset: -1, LocalLogStartOffset: logStartOffset}
	if old, ok, err := s.offsets(tp); err != nil {
		return err
	} else if ok && old == off {
		return nil
	}
	return s.putOffsets(tp, off)
}

// clusterIDKey holds the id of the Kafka cluster the metadata belongs to.
var clusterIDKey = []byte("mcluster_id")

// ClusterID returns the Kafka cluster id recorded by SetClusterID, or ""
// when none is.
func (s *Store) ClusterID() (string, error) {
	v, err := s.get(clusterIDKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return "", nil
	}
	return string(v), err
}

// SetClusterID records the Kafka cluster id the metadata belongs to
// (synced); the id already recorded is not written again.
func (s *Store) SetClusterID(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, err := s.ClusterID(); err != nil {
		return err
	} else if old == id {
		return nil
	}
	b := s.db().NewBatch()
	defer b.Close()
	if err := b.Set(clusterIDKey, []byte(id), nil); err != nil {
		return err
	}
	return s.commitSynced(b)
}
