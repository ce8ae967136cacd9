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
// offset as log start offset; an existing record is left alone.
func (s *Store) EnsurePartition(tp remotelog.TopicPartition, logStartOffset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db().NewBatch()
	defer b.Close()
	if err := s.ensurePartition(b, tp, logStartOffset); err != nil {
		return err
	}
	return s.commit(b)
}

func (s *Store) ensurePartition(b *pebble.Batch, tp remotelog.TopicPartition, lso int64) error {
	_, ok, err := s.offsets(tp)
	if err != nil || ok {
		return err
	}
	return putJSON(b, partitionKey(tp), remotelog.PartitionOffsets{LogStartOffset: lso, HighestTieredOffset: -1, LocalLogStartOffset: lso})
}

// AdvanceOffsets raises the log start offset and the local log start offset
// of a partition to at least the given values (-1 leaves one unchanged);
// they never move back. The local log start offset is what is on local
// disk; it may lie below the log start offset while a broker's retention
// has not caught up. The write is synced, so callers may delete data
// below the new offsets once it returns.
func (s *Store) AdvanceOffsets(tp remotelog.TopicPartition, logStart, localLogStart int64) (remotelog.PartitionOffsets, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, _, err := s.offsets(tp)
	if err != nil {
		return off, err
	}
	off.LogStartOffset = max(off.LogStartOffset, logStart)
	off.LocalLogStartOffset = max(off.LocalLogStartOffset, localLogStart)
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, partitionKey(tp), off); err != nil {
		return off, err
	}
	return off, s.commit(b)
}

// Snapshot returns a partition's offsets and finished rows as of one
// instant, so a reader never pairs a log start offset with rows from
// before or after a retention step. Results are cached until the next
// write to the store; the returned slice must not be modified.
func (s *Store) Snapshot(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, []remotelog.SegmentMetadata, error) {
	gen := s.gen.Load()
	s.snapMu.Lock()
	c, hit := s.snaps[tp]
	s.snapMu.Unlock()
	if hit && c.gen == gen {
		return c.off, c.ok, c.fin, nil
	}
	db, done := s.read()
	defer done()
	snap := db.NewSnapshot()
	defer snap.Close()
	off, ok, err := readOffsets(snap, tp)
	if err != nil {
		return off, ok, nil, err
	}
	fin, err := finishedSegments(snap, tp)
	if err != nil {
		return off, ok, nil, err
	}
	if s.gen.Load() == gen { // no write raced the snapshot's creation
		s.snapMu.Lock()
		s.snaps[tp] = snapshot{gen: gen, off: off, ok: ok, fin: fin}
		s.snapMu.Unlock()
	}
	return off, ok, fin, nil
}

// SetTopicID records the topic id of a partition whose offsets have none.
func (s *Store) SetTopicID(tp remotelog.TopicPartition, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok, err := s.offsets(tp)
	if err != nil || !ok || off.TopicID != "" {
		return err
	}
	off.TopicID = id
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, partitionKey(tp), off); err != nil {
		return err
	}
	return s.commit(b)
}

// ResetPartition starts a partition over, as a new incarnation of its topic
// (deleted and re-created): offsets from logStartOffset with nothing
// tiered, under the new topic id. The caller deletes the old incarnation's
// copies first.
func (s *Store) ResetPartition(tp remotelog.TopicPartition, logStartOffset int64, topicID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, partitionKey(tp), remotelog.PartitionOffsets{TopicID: topicID, LogStartOffset: logStartOffset,
		HighestTieredOffset: -1, LocalLogStartOffset: logStartOffset}); err != nil {
		return err
	}
	return s.commit(b)
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
// (synced).
func (s *Store) SetClusterID(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db().NewBatch()
	defer b.Close()
	if err := b.Set(clusterIDKey, []byte(id), nil); err != nil {
		return err
	}
	return s.commit(b)
}
