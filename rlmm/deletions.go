package rlmm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tierd/tierd/internal/remotelog"
)

// Errors of scheduled partition deletions.
var (
	ErrPartitionNotFound  = fmt.Errorf("rlmm: partition %w", remotelog.ErrNotFound)
	ErrTopicIDMismatch    = fmt.Errorf("rlmm: topic id does not match the recorded one (%w)", remotelog.ErrRefused)
	ErrDeletionExists     = fmt.Errorf("rlmm: a deletion of this partition's incarnation is already scheduled (%w)", remotelog.ErrRefused)
	ErrDeletionNotFound   = fmt.Errorf("rlmm: scheduled deletion %w", remotelog.ErrNotFound)
	ErrDeletionInProgress = fmt.Errorf("rlmm: the deletion is already running and cannot be cancelled (%w)", remotelog.ErrRefused)
	ErrRestoreConflict    = fmt.Errorf("rlmm: the partition is tiered again under another incarnation (%w)", remotelog.ErrRefused)
)

// Key layout of the deletion families:
//
//	'd' topic 0x00 partition(4) topicID -> PartitionDeletion JSON
//	'j' seq(8)                          -> JournalEntry JSON
const (
	deletionTag = 'd'
	journalTag  = 'j'
)

func deletionPrefix(tp remotelog.TopicPartition) []byte { return tpBytes([]byte{deletionTag}, tp) }

func deletionKey(tp remotelog.TopicPartition, topicID string) []byte {
	return append(deletionPrefix(tp), topicID...)
}

func journalKey(seq int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{journalTag}, uint64(seq))
}

// lastJournalSeq returns the highest journal sequence number, 0 when empty.
func (s *Store) lastJournalSeq() (int64, error) {
	db, done := s.read()
	defer done()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{journalTag}, UpperBound: []byte{journalTag + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	k := it.Key()
	if len(k) != 9 {
		return 0, fmt.Errorf("rlmm: bad journal key %q", k)
	}
	return int64(binary.BigEndian.Uint64(k[1:])), nil
}

// journal adds an entry to b, numbering it. Callers hold s.mu.
func (s *Store) journal(b *pebble.Batch, e remotelog.JournalEntry) error {
	s.journalSeq++
	e.Seq = s.journalSeq
	if e.TimeMs == 0 {
		e.TimeMs = s.now().UnixMilli()
	}
	return putJSON(b, journalKey(e.Seq), e)
}

func entryFor(d remotelog.PartitionDeletion, event, detail string, nowMs int64) remotelog.JournalEntry {
	return remotelog.JournalEntry{TimeMs: nowMs, Event: event, TopicPartition: d.TopicPartition, TopicID: d.TopicID,
		Reason: d.Reason, Proof: d.Proof, DueMs: d.DueMs, Segments: len(d.Segments), Bytes: d.Bytes(), Detail: detail}
}

// ScheduleDeletion records that every remote copy of a partition's
// incarnation topicID (which must be the recorded topic id) is to be
// deleted at dueMs, with its reason and proof, and journals it, in one
// synced write. The partition's rows (all but DELETE_SEGMENT_FINISHED
// ones) and offsets leave the live metadata: reads of the partition stop,
// and a re-created topic of the same name starts afresh. It returns the
// record; the objects are not touched. Errors: ErrPartitionNotFound,
// ErrTopicIDMismatch, ErrDeletionExists.
func (s *Store) ScheduleDeletion(tp remotelog.TopicPartition, topicID string, reason remotelog.DeletionReason, proof string, dueMs int64) (remotelog.PartitionDeletion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := remotelog.PartitionDeletion{TopicPartition: tp, TopicID: topicID, Reason: reason, Proof: proof,
		ScheduledMs: s.now().UnixMilli(), DueMs: dueMs, State: remotelog.DeletionPending}
	off, ok, err := s.offsets(tp)
	if err != nil {
		return d, err
	}
	if !ok {
		return d, fmt.Errorf("%w: %s", ErrPartitionNotFound, tp)
	}
	if off.TopicID != topicID {
		return d, fmt.Errorf("%w: %s is recorded as topic id %q, not %q", ErrTopicIDMismatch, tp, off.TopicID, topicID)
	}
	k := deletionKey(tp, topicID)
	if _, err := s.get(k); err == nil {
		return d, fmt.Errorf("%w: %s topic id %q", ErrDeletionExists, tp, topicID)
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return d, err
	}
	rows, err := s.scanRows(segmentPrefix(tp))
	if err != nil {
		return d, err
	}
	d.Offsets = off
	b := s.db().NewBatch()
	defer b.Close()
	for _, r := range rows {
		if r.State != remotelog.DeleteSegmentFinished {
			d.Segments = append(d.Segments, r)
		}
		if err := b.Delete(segmentKey(tp, r.StartOffset, r.ID), nil); err != nil {
			return d, err
		}
		if err := b.Delete(finishedKey(tp, r.StartOffset, r.ID), nil); err != nil {
			return d, err
		}
	}
	if err := b.Delete(partitionKey(tp), nil); err != nil {
		return d, err
	}
	if err := putJSON(b, k, d); err != nil {
		return d, err
	}
	if err := s.journal(b, entryFor(d, remotelog.JournalScheduled, "", d.ScheduledMs)); err != nil {
		return d, err
	}
	return d, s.commitChange(b, tp, nil) // every row goes: readers reload the partition
}

// CancelDeletion cancels a PENDING deletion and puts the partition's rows
// and offsets back, journaling who or what cancelled it (detail). With
// keep (an operator's restore), the offsets record detail as
// OperatorKept. It
// refuses (ErrRestoreConflict) when the partition has been tiered again
// meanwhile under another incarnation or has copies of its own again, and
// (ErrDeletionInProgress) once the deletion runs. Errors also:
// ErrDeletionNotFound.
func (s *Store) CancelDeletion(tp remotelog.TopicPartition, topicID, detail string, keep bool) (remotelog.PartitionDeletion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.deletion(tp, topicID)
	if err != nil {
		return d, err
	}
	if d.State != remotelog.DeletionPending {
		return d, fmt.Errorf("%w: %s", ErrDeletionInProgress, d)
	}
	off, ok, err := s.offsets(tp)
	if err != nil {
		return d, err
	}
	if ok {
		rows, err := s.scanRows(segmentPrefix(tp))
		if err != nil {
			return d, err
		}
		live := 0
		for _, r := range rows {
			if r.State != remotelog.DeleteSegmentFinished {
				live++
			}
		}
		if off.TopicID != d.TopicID || live > 0 {
			return d, fmt.Errorf("%w: %s is now recorded as topic id %q with %d copies; the copies of topic id %q stay scheduled",
				ErrRestoreConflict, tp, off.TopicID, live, d.TopicID)
		}
	}
	b := s.db().NewBatch()
	defer b.Close()
	for _, r := range d.Segments {
		if err := putJSON(b, segmentKey(tp, r.StartOffset, r.ID), r); err != nil {
			return d, err
		}
		if r.State == remotelog.CopySegmentFinished {
			if err := putJSON(b, finishedKey(tp, r.StartOffset, r.ID), r); err != nil {
				return d, err
			}
		}
	}
	offs := d.Offsets
	if keep {
		offs.OperatorKept = detail
	}
	if err := putJSON(b, partitionKey(tp), offs); err != nil {
		return d, err
	}
	if err := b.Delete(deletionKey(tp, topicID), nil); err != nil {
		return d, err
	}
	if err := s.journal(b, entryFor(d, remotelog.JournalCancelled, detail, s.now().UnixMilli())); err != nil {
		return d, err
	}
	return d, s.commitChange(b, tp, nil) // every row comes back: readers reload the partition
}

// StartDeletion marks a deletion DELETING and journals it (synced) before
// the caller deletes the first object; from then on it cannot be
// cancelled. Starting a DELETING one again (after a crash) journals
// nothing new. Errors: ErrDeletionNotFound.
func (s *Store) StartDeletion(tp remotelog.TopicPartition, topicID, detail string) (remotelog.PartitionDeletion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.deletion(tp, topicID)
	if err != nil || d.State == remotelog.DeletionDeleting {
		return d, err
	}
	d.State = remotelog.DeletionDeleting
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, deletionKey(tp, topicID), d); err != nil {
		return d, err
	}
	if err := s.journal(b, entryFor(d, remotelog.JournalDeleting, detail, s.now().UnixMilli())); err != nil {
		return d, err
	}
	return d, s.commitSynced(b)
}

// FinishDeletion removes a DELETING record once every object is gone and
// journals it with detail (what was deleted). Errors: ErrDeletionNotFound,
// and ErrDeletionInProgress's opposite: a PENDING record is refused.
func (s *Store) FinishDeletion(tp remotelog.TopicPartition, topicID, detail string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.deletion(tp, topicID)
	if err != nil {
		return err
	}
	if d.State != remotelog.DeletionDeleting {
		return fmt.Errorf("rlmm: finish of a deletion in state %s: %s", d.State, d)
	}
	b := s.db().NewBatch()
	defer b.Close()
	if err := b.Delete(deletionKey(tp, topicID), nil); err != nil {
		return err
	}
	if err := s.journal(b, entryFor(d, remotelog.JournalDeleted, detail, s.now().UnixMilli())); err != nil {
		return err
	}
	return s.commitSynced(b)
}

func (s *Store) deletion(tp remotelog.TopicPartition, topicID string) (remotelog.PartitionDeletion, error) {
	var d remotelog.PartitionDeletion
	v, err := s.get(deletionKey(tp, topicID))
	if errors.Is(err, pebble.ErrNotFound) {
		return d, fmt.Errorf("%w: %s topic id %q", ErrDeletionNotFound, tp, topicID)
	}
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(v, &d); err != nil {
		return d, fmt.Errorf("rlmm: decode deletion: %w", err)
	}
	return d, nil
}

// Deletions returns the scheduled deletions of one partition (every
// incarnation), or of every partition when tp is nil, ordered by
// partition and topic id.
func (s *Store) Deletions(tp *remotelog.TopicPartition) ([]remotelog.PartitionDeletion, error) {
	lower, upper := []byte{deletionTag}, []byte{deletionTag + 1}
	if tp != nil {
		lower = deletionPrefix(*tp)
		upper = successor(lower)
	}
	db, done := s.read()
	defer done()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []remotelog.PartitionDeletion
	for it.First(); it.Valid(); it.Next() {
		var d remotelog.PartitionDeletion
		if err := json.Unmarshal(it.Value(), &d); err != nil {
			return nil, fmt.Errorf("rlmm: decode deletion: %w", err)
		}
		if tp != nil && d.TopicPartition != *tp {
			continue // a longer topic name sharing the prefix cannot happen (0x00 ends it), but be exact
		}
		out = append(out, d)
	}
	return out, it.Error()
}

// Journal returns up to limit journal entries with a sequence number
// above afterSeq, oldest first (limit <= 0: all).
func (s *Store) Journal(afterSeq int64, limit int) ([]remotelog.JournalEntry, error) {
	afterSeq = max(afterSeq, 0)
	db, done := s.read()
	defer done()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: journalKey(afterSeq + 1), UpperBound: []byte{journalTag + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []remotelog.JournalEntry
	for it.First(); it.Valid() && (limit <= 0 || len(out) < limit); it.Next() {
		var e remotelog.JournalEntry
		if err := json.Unmarshal(it.Value(), &e); err != nil {
			return nil, fmt.Errorf("rlmm: decode journal entry: %w", err)
		}
		out = append(out, e)
	}
	return out, it.Error()
}

// CarryOver copies the scheduled deletions, the deletion journal, the
// broker-copy catalogue (brokercopies.go: the bucket's manifests of
// tierd's own copies cannot rebuild it) and the recorded cluster id of
// another store (the metadata dir a rebuild set aside) and the consumer
// groups of the Kafka listener (groups.go) into this one, in
// one synced write, before rows are rebuilt: copies scheduled for
// deletion then stay out of the rebuilt rows, and the journal goes on.
// It returns how many deletions and journal entries it copied.
func (s *Store) CarryOver(from *Store) (deletions, entries int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db().NewBatch()
	defer b.Close()
	fromDB, fromDone := from.read()
	defer fromDone()
	for _, tag := range []byte{deletionTag, journalTag, brokerCopyTag, brokerCopyIDTag, groupTag} {
		it, err := fromDB.NewIter(&pebble.IterOptions{LowerBound: []byte{tag}, UpperBound: []byte{tag + 1}})
		if err != nil {
			return deletions, entries, err
		}
		for it.First(); it.Valid(); it.Next() {
			if err := b.Set(append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...), nil); err != nil {
				it.Close()
				return deletions, entries, err
			}
			switch tag {
			case deletionTag:
				deletions++
			case journalTag:
				entries++
			}
		}
		if err := it.Close(); err != nil {
			return deletions, entries, err
		}
	}
	if id, err := from.ClusterID(); err != nil {
		return deletions, entries, err
	} else if id != "" {
		if err := b.Set(clusterIDKey, []byte(id), nil); err != nil {
			return deletions, entries, err
		}
	}
	if err := s.commitSynced(b); err != nil {
		return deletions, entries, err
	}
	s.journalSeq, err = s.lastJournalSeq()
	return deletions, entries, err
}
