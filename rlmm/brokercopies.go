package rlmm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tierd/tierd/internal/remotelog"
)

// The broker-copy catalogue: rows of the copies a Kafka broker makes
// through tierd's RSM endpoint (broker-owned copies). The broker's own
// remote log metadata (__remote_log_metadata) is their truth; these rows
// let tierd's tools, status and metrics show them. They live in key
// families of their own, which no other method of the store reads or
// writes (Partitions, Segments, FinishedSegments, FinishedSnapshot,
// Offsets, the change log and the Generation never see them), so that
// tierd's copier, retention and sweeps cannot meet them:
//
//	'b' topic 0x00 partition(4) startOffset(8) segmentID(16) -> SegmentMetadata JSON
//	'B' topic 0x00 partition(4) segmentID(16)                -> startOffset(8)
//
// 'B' finds a row by segment id alone. Every write is synced.
const (
	brokerCopyTag   = 'b'
	brokerCopyIDTag = 'B'
)

func brokerCopyPrefix(tp remotelog.TopicPartition) []byte {
	return tpBytes([]byte{brokerCopyTag}, tp)
}

func brokerCopyKey(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) []byte {
	k := binary.BigEndian.AppendUint64(brokerCopyPrefix(tp), uint64(start))
	return append(k, id[:]...)
}

func brokerCopyIDKey(tp remotelog.TopicPartition, id remotelog.SegmentID) []byte {
	return append(tpBytes([]byte{brokerCopyIDTag}, tp), id[:]...)
}

// PutBrokerCopy records a broker-owned copy's row, or replaces the row of
// the same segment id (a retried copy of the same segment id, which
// Kafka's contract says overwrites), in one synced write. The row is
// normally in COPY_SEGMENT_STARTED; any state is taken. Its
// EventTimestampMs is set to the store's clock. Errors: a row without a
// topic, with offsets that are not a segment's ([StartOffset, EndOffset],
// StartOffset >= 0) or in no known state; the store's.
func (s *Store) PutBrokerCopy(meta remotelog.SegmentMetadata) error {
	if meta.TopicPartition.Topic == "" {
		return errors.New("rlmm: broker copy without a topic")
	}
	if meta.EndOffset < meta.StartOffset || meta.StartOffset < 0 {
		return fmt.Errorf("rlmm: broker copy range [%d, %d] is empty", meta.StartOffset, meta.EndOffset)
	}
	if meta.State > remotelog.DeleteSegmentFinished {
		return fmt.Errorf("rlmm: broker copy in state %d: %w", meta.State, remotelog.ErrIllegalTransition)
	}
	s.brokerMu.Lock()
	defer s.brokerMu.Unlock()
	b := s.db().NewBatch()
	defer b.Close()
	// The same id at another start offset is the same copy: its old row goes.
	if old, err := s.brokerCopyStart(meta.TopicPartition, meta.ID); err == nil && old != meta.StartOffset {
		if err := b.Delete(brokerCopyKey(meta.TopicPartition, old, meta.ID), nil); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, ErrSegmentNotFound) {
		return err
	}
	meta.EventTimestampMs = s.now().UnixMilli()
	if err := putJSON(b, brokerCopyKey(meta.TopicPartition, meta.StartOffset, meta.ID), meta); err != nil {
		return err
	}
	if err := b.Set(brokerCopyIDKey(meta.TopicPartition, meta.ID), binary.BigEndian.AppendUint64(nil, uint64(meta.StartOffset)), nil); err != nil {
		return err
	}
	if err := s.commitBroker(b); err != nil {
		return err
	}
	s.brokerTransitions.WithLabelValues(meta.State.String()).Inc()
	return nil
}

// SetBrokerCopyState moves a broker-owned copy's row to state to, after
// checking the transition by Kafka's rules (remotelog.CheckTransition),
// in one synced write, and returns the row as written (on error, as read;
// zero when not found). Errors: ErrSegmentNotFound,
// remotelog.ErrIllegalTransition (wrapped), the store's.
func (s *Store) SetBrokerCopyState(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, to remotelog.SegmentState) (remotelog.SegmentMetadata, error) {
	s.brokerMu.Lock()
	defer s.brokerMu.Unlock()
	k := brokerCopyKey(tp, start, id)
	meta, err := s.segment(k)
	if err != nil {
		return meta, err
	}
	if err := remotelog.CheckTransition(meta.State, to); err != nil {
		return meta, fmt.Errorf("broker copy %s segment %s: %w", tp, id, err)
	}
	was := meta
	meta.State, meta.EventTimestampMs = to, s.now().UnixMilli()
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, k, meta); err != nil {
		return was, err
	}
	if err := s.commitBroker(b); err != nil {
		return was, err
	}
	s.brokerTransitions.WithLabelValues(to.String()).Inc()
	return meta, nil
}

// BrokerCopy returns one broker-owned copy's row. Errors:
// ErrSegmentNotFound, the store's.
func (s *Store) BrokerCopy(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error) {
	return s.segment(brokerCopyKey(tp, start, id))
}

// BrokerCopyByID returns the broker-owned copy's row of a segment id,
// whatever its start offset (two reads). Errors: ErrSegmentNotFound, the
// store's.
func (s *Store) BrokerCopyByID(tp remotelog.TopicPartition, id remotelog.SegmentID) (remotelog.SegmentMetadata, error) {
	start, err := s.brokerCopyStart(tp, id)
	if err != nil {
		return remotelog.SegmentMetadata{}, err
	}
	return s.BrokerCopy(tp, start, id)
}

// brokerCopyStart returns the start offset of the row of a segment id.
func (s *Store) brokerCopyStart(tp remotelog.TopicPartition, id remotelog.SegmentID) (int64, error) {
	v, err := s.get(brokerCopyIDKey(tp, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, ErrSegmentNotFound
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("rlmm: bad broker copy id entry of %s %s (%d bytes)", tp, id, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// BrokerCopies returns every broker-owned copy's row of a partition, in
// any state, ordered by start offset (then segment id).
func (s *Store) BrokerCopies(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return s.scanRows(brokerCopyPrefix(tp))
}

// BrokerPartitions lists the partitions that have broker-owned copies'
// rows, ordered by topic, then partition. It reads one row per partition.
func (s *Store) BrokerPartitions() ([]remotelog.TopicPartition, error) {
	db, done := s.read()
	defer done()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{brokerCopyTag}, UpperBound: []byte{brokerCopyTag + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []remotelog.TopicPartition
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < 1+5+8+16 {
			return out, fmt.Errorf("rlmm: bad broker copy key %q", k)
		}
		tp, err := decodeTP(k[1 : len(k)-8-16])
		if err != nil {
			return out, err
		}
		out = append(out, tp)
		valid = it.SeekGE(successor(brokerCopyPrefix(tp)))
	}
	return out, it.Error()
}

// ForgetBrokerCopy removes a broker-owned copy's row, in any state, in
// one synced write (the endpoint's bookkeeping once the broker deleted
// the copy, or for a copy it never reported stored). Errors:
// ErrSegmentNotFound, the store's.
func (s *Store) ForgetBrokerCopy(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) error {
	s.brokerMu.Lock()
	defer s.brokerMu.Unlock()
	k := brokerCopyKey(tp, start, id)
	if _, err := s.segment(k); err != nil {
		return err
	}
	b := s.db().NewBatch()
	defer b.Close()
	if err := b.Delete(k, nil); err != nil {
		return err
	}
	if err := b.Delete(brokerCopyIDKey(tp, id), nil); err != nil {
		return err
	}
	return s.commitBroker(b)
}

// PurgeBrokerCopies removes the broker-owned copies' rows of a partition
// that reached DELETE_SEGMENT_FINISHED before beforeMs (ms since the
// epoch, the store's clock), in one synced write, and returns how many
// it removed; none removed makes no write.
func (s *Store) PurgeBrokerCopies(tp remotelog.TopicPartition, beforeMs int64) (int, error) {
	s.brokerMu.Lock()
	defer s.brokerMu.Unlock()
	rows, err := s.BrokerCopies(tp)
	if err != nil {
		return 0, err
	}
	b := s.db().NewBatch()
	defer b.Close()
	n := 0
	for _, r := range rows {
		if r.State != remotelog.DeleteSegmentFinished || r.EventTimestampMs >= beforeMs {
			continue
		}
		if err := b.Delete(brokerCopyKey(tp, r.StartOffset, r.ID), nil); err != nil {
			return 0, err
		}
		if err := b.Delete(brokerCopyIDKey(tp, r.ID), nil); err != nil {
			return 0, err
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return n, s.commitBroker(b)
}

// commitBroker commits a write of the broker-copy catalogue, synced and
// counted, without changing the Generation.
func (s *Store) commitBroker(b *pebble.Batch) error {
	s.syncedWrites.Inc()
	return s.apply(b)
}
