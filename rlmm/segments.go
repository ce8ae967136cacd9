package rlmm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/tierd/tierd/internal/remotelog"
)

// AddSegment writes a new row, which must be in COPY_SEGMENT_STARTED (the
// first state of every copy) and must not exist yet.
func (s *Store) AddSegment(meta remotelog.SegmentMetadata) error {
	if meta.State != remotelog.CopySegmentStarted {
		return fmt.Errorf("rlmm: new segment in state %s: %w", meta.State, remotelog.ErrIllegalTransition)
	}
	if meta.EndOffset < meta.StartOffset || meta.StartOffset < 0 {
		return fmt.Errorf("rlmm: segment range [%d, %d] is empty", meta.StartOffset, meta.EndOffset)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := segmentKey(meta.TopicPartition, meta.StartOffset, meta.ID)
	if _, err := s.get(k); err == nil {
		return fmt.Errorf("%w: %s %s", ErrSegmentExists, meta.TopicPartition, meta.ID)
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	meta.EventTimestampMs = s.now().UnixMilli()
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, k, meta); err != nil {
		return err
	}
	off, err := s.ensurePartition(b, meta.TopicPartition, meta.StartOffset)
	if err != nil {
		return err
	}
	if err := s.commitChange(b, meta.TopicPartition, &remotelog.Change{Offsets: off}); err != nil {
		return err
	}
	s.transitions.WithLabelValues(meta.State.String()).Inc()
	return nil
}

// ImportSegment writes a COPY_SEGMENT_FINISHED row restored from a bucket
// manifest (metadata rebuild) and raises the partition's highest tiered
// offset. An existing row with the same id is left as it is.
func (s *Store) ImportSegment(meta remotelog.SegmentMetadata) error {
	if meta.State != remotelog.CopySegmentFinished {
		return fmt.Errorf("rlmm: import of a row in state %s: %w", meta.State, remotelog.ErrIllegalTransition)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := segmentKey(meta.TopicPartition, meta.StartOffset, meta.ID)
	if _, err := s.get(k); err == nil {
		return nil
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, k, meta); err != nil {
		return err
	}
	if err := putJSON(b, finishedKey(meta.TopicPartition, meta.StartOffset, meta.ID), meta); err != nil {
		return err
	}
	off, ok, err := s.offsets(meta.TopicPartition)
	if err != nil {
		return err
	}
	if !ok {
		off = remotelog.PartitionOffsets{LogStartOffset: meta.StartOffset, HighestTieredOffset: -1, LocalLogStartOffset: meta.StartOffset}
	}
	off.HighestTieredOffset = max(off.HighestTieredOffset, meta.EndOffset)
	if err := putJSON(b, partitionKey(meta.TopicPartition), off); err != nil {
		return err
	}
	if err := s.commitChange(b, meta.TopicPartition, finishedSet(meta, &off)); err != nil {
		return err
	}
	s.transitions.WithLabelValues(meta.State.String()).Inc()
	return nil
}

// UpdateState moves a row to state to, after checking the transition (see
// remotelog.CheckTransition). Entering COPY_SEGMENT_FINISHED also raises
// the partition's highest tiered offset, in the same synced write. It
// returns the row as written, or on error the row as read (zero when
// not found). Errors: ErrSegmentNotFound, remotelog.ErrIllegalTransition
// (wrapped), the store's.
func (s *Store) UpdateState(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, to remotelog.SegmentState) (remotelog.SegmentMetadata, error) {
	out, err := s.updateStates(tp, []remotelog.SegmentMetadata{{TopicPartition: tp, StartOffset: start, ID: id}}, to)
	return out[0], err
}

// UpdateStates moves rows of one partition, each named by its
// TopicPartition, StartOffset and ID (the other fields are not read), to
// state to in one synced write, with the checks and effects UpdateState
// makes for each: the row exists, the transition is valid, the finished
// rows, the highest tiered offset (entering COPY_SEGMENT_FINISHED), the
// partition's version and its change (one change holding every row, so
// ChangesSince sees them all; a write of more than 256 rows makes readers
// reload the partition instead). It writes all rows or none. It returns
// the rows as written, in the order given; nothing is written for none.
// Entering COPY_SEGMENT_FINISHED, a row's StoredSizeInBytes and
// Encrypted, when set, are recorded too (a chunked copy's stored .log
// size and whether it is sealed, known once uploaded).
// Errors: ErrSegmentNotFound, remotelog.ErrIllegalTransition (wrapped),
// a row of another partition or named twice, the store's.
func (s *Store) UpdateStates(tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, to remotelog.SegmentState) ([]remotelog.SegmentMetadata, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	out, err := s.updateStates(tp, rows, to)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// updateStates is UpdateStates; on error the last row returned is the
// one that failed, as read.
func (s *Store) updateStates(tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, to remotelog.SegmentState) ([]remotelog.SegmentMetadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nowMs := s.now().UnixMilli()
	b := s.db().NewBatch()
	defer b.Close()
	out := make([]remotelog.SegmentMetadata, 0, len(rows))
	ch := &remotelog.Change{Finished: make([]remotelog.FinishedOp, 0, len(rows))}
	seen := make(map[remotelog.SegmentID]bool, len(rows))
	highest := int64(-1)
	for _, r := range rows {
		if r.TopicPartition != tp {
			return append(out, r), fmt.Errorf("rlmm: segment %s of %s in a write to %s", r.ID, r.TopicPartition, tp)
		}
		if seen[r.ID] {
			return append(out, r), fmt.Errorf("rlmm: %s segment %s named twice in one write", tp, r.ID)
		}
		seen[r.ID] = true
		k := segmentKey(tp, r.StartOffset, r.ID)
		meta, err := s.segment(k)
		if err != nil {
			return append(out, meta), err
		}
		if err := remotelog.CheckTransition(meta.State, to); err != nil {
			return append(out, meta), fmt.Errorf("%s segment %s: %w", tp, r.ID, err)
		}
		meta.State, meta.EventTimestampMs = to, nowMs
		if to == remotelog.CopySegmentFinished && r.StoredSizeInBytes > 0 {
			meta.StoredSizeInBytes = r.StoredSizeInBytes // known once uploaded
		}
		if to == remotelog.CopySegmentFinished && r.Encrypted {
			meta.Encrypted = true
		}
		if err := putJSON(b, k, meta); err != nil {
			return append(out, meta), err
		}
		// The 'f' family mirrors the finished rows, so readers never
		// decode the rows of deleted copies.
		fk := finishedKey(tp, r.StartOffset, r.ID)
		op := remotelog.FinishedOp{StartOffset: r.StartOffset, ID: r.ID}
		if to == remotelog.CopySegmentFinished {
			if err := putJSON(b, fk, meta); err != nil {
				return append(out, meta), err
			}
			row := meta
			op.Row = &row
			highest = max(highest, meta.EndOffset)
		} else if err := b.Delete(fk, nil); err != nil {
			return append(out, meta), err
		}
		ch.Finished = append(ch.Finished, op)
		out = append(out, meta)
	}
	if to == remotelog.CopySegmentFinished {
		off, _, err := s.offsets(tp)
		if err != nil {
			return out, err
		}
		off.HighestTieredOffset = max(off.HighestTieredOffset, highest)
		if err := putJSON(b, partitionKey(tp), off); err != nil {
			return out, err
		}
		ch.Offsets = &off
	}
	if err := s.commitChange(b, tp, ch); err != nil {
		return out, err
	}
	s.transitions.WithLabelValues(to.String()).Add(float64(len(out)))
	return out, nil
}

// Segment returns one row.
func (s *Store) Segment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error) {
	return s.segment(segmentKey(tp, start, id))
}

func (s *Store) segment(k []byte) (remotelog.SegmentMetadata, error) {
	var meta remotelog.SegmentMetadata
	v, err := s.get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return meta, ErrSegmentNotFound
	}
	if err != nil {
		return meta, err
	}
	if err := json.Unmarshal(v, &meta); err != nil {
		return meta, fmt.Errorf("rlmm: decode row: %w", err)
	}
	return meta, nil
}

// Segments returns every row of a partition, in any state, ordered by start
// offset (then segment id).
func (s *Store) Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return s.scanRows(segmentPrefix(tp))
}

// FinishedSegments returns the COPY_SEGMENT_FINISHED rows a reader should
// use, ordered by start offset: a row whose offsets a newer finished copy
// covers entirely is superseded and left out (see Supersede).
func (s *Store) FinishedSegments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	db, done := s.read()
	defer done()
	return finishedSegments(db, tp)
}

// reader is what *pebble.DB and *pebble.Snapshot share.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

func finishedSegments(r reader, tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	fin, err := scanRows(r, finishedPrefix(tp))
	if err != nil {
		return nil, err
	}
	return remotelog.Supersede(fin), nil
}

func scanRows(r reader, prefix []byte) ([]remotelog.SegmentMetadata, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: successor(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []remotelog.SegmentMetadata
	for it.First(); it.Valid(); it.Next() {
		var meta remotelog.SegmentMetadata
		if err := json.Unmarshal(it.Value(), &meta); err != nil {
			return nil, fmt.Errorf("rlmm: decode row: %w", err)
		}
		out = append(out, meta)
	}
	return out, it.Error()
}

// PurgeDeleted removes the rows of a partition that reached
// DELETE_SEGMENT_FINISHED before the given time (ms): their objects are
// gone, and keeping them forever would only slow every scan.
func (s *Store) PurgeDeleted(tp remotelog.TopicPartition, beforeMs int64) (int, error) {
	rows, err := s.Segments(tp)
	if err != nil {
		return 0, err
	}
	b := s.db().NewBatch()
	defer b.Close()
	n := 0
	for _, r := range rows {
		if r.State == remotelog.DeleteSegmentFinished && r.EventTimestampMs < beforeMs {
			if err := b.Delete(segmentKey(tp, r.StartOffset, r.ID), nil); err != nil {
				return 0, err
			}
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	// DELETE_SEGMENT_FINISHED is final, so the rows read above cannot have
	// changed; the lock orders the write's generation among the others.
	s.mu.Lock()
	defer s.mu.Unlock()
	return n, s.commitChange(b, tp, &remotelog.Change{}) // no finished row changes
}

// Supersede is remotelog.Supersede.
func Supersede(fin []remotelog.SegmentMetadata) []remotelog.SegmentMetadata {
	return remotelog.Supersede(fin)
}

// MarkDamaged records on a finished row that some of its objects are
// missing from the bucket (reason says which), in one synced write; the
// row stays COPY_SEGMENT_FINISHED. Errors: ErrSegmentNotFound.
func (s *Store) MarkDamaged(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, reason string) (remotelog.SegmentMetadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := segmentKey(tp, start, id)
	meta, err := s.segment(k)
	if err != nil {
		return meta, err
	}
	if meta.State != remotelog.CopySegmentFinished {
		return meta, fmt.Errorf("rlmm: mark damaged a row in state %s: %w", meta.State, remotelog.ErrIllegalTransition)
	}
	if meta.Damaged == reason {
		return meta, nil // already recorded: no write
	}
	meta.Damaged = reason
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, k, meta); err != nil {
		return meta, err
	}
	if err := putJSON(b, finishedKey(tp, start, id), meta); err != nil {
		return meta, err
	}
	return meta, s.commitChange(b, tp, finishedSet(meta, nil))
}

// ClearDamaged removes a finished row's damaged mark (a later check found
// all its objects present with the checksums its manifest records), in
// one synced write, and returns the row as it was. A row without a mark
// is left as it is. Errors: ErrSegmentNotFound, ErrIllegalTransition for
// a row not COPY_SEGMENT_FINISHED.
func (s *Store) ClearDamaged(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := segmentKey(tp, start, id)
	meta, err := s.segment(k)
	if err != nil {
		return meta, err
	}
	if meta.State != remotelog.CopySegmentFinished {
		return meta, fmt.Errorf("rlmm: clear the damage of a row in state %s: %w", meta.State, remotelog.ErrIllegalTransition)
	}
	if meta.Damaged == "" {
		return meta, nil
	}
	was := meta
	meta.Damaged = ""
	b := s.db().NewBatch()
	defer b.Close()
	if err := putJSON(b, k, meta); err != nil {
		return was, err
	}
	if err := putJSON(b, finishedKey(tp, start, id), meta); err != nil {
		return was, err
	}
	return was, s.commit(b)
}

// ForgetSegment removes a COPY_SEGMENT_STARTED row without touching its
// objects: a copy whose manifest this tierd wrote after a newer leader
// fenced the partition belongs to that leader's judgement now (it may
// have taken it in). Errors: ErrSegmentNotFound, ErrIllegalTransition
// for a row in another state.
func (s *Store) ForgetSegment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := segmentKey(tp, start, id)
	meta, err := s.segment(k)
	if err != nil {
		return err
	}
	if meta.State != remotelog.CopySegmentStarted {
		return fmt.Errorf("rlmm: forget a row in state %s: %w", meta.State, remotelog.ErrIllegalTransition)
	}
	b := s.db().NewBatch()
	defer b.Close()
	if err := b.Delete(k, nil); err != nil {
		return err
	}
	return s.commitChange(b, tp, &remotelog.Change{}) // a started row: no finished row changes
}
