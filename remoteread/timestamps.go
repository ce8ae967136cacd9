package remoteread

import (
	"context"
	"sort"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
)

// tsOffset is a record's offset and timestamp (ms), found or not.
type tsOffset struct {
	offset, timestamp int64
	found             bool
}

// RemoteOffsetForTimestamp returns, as the ListOffsets RPC with TIMESTAMP
// does, the first offset at or after the log start offset of the finished
// copies whose record timestamp is >= ts (ms), and that timestamp; found
// is false when no tiered record is that late. Errors as ReadRemote
// (ErrStillLoading aside).
func (s *Engine) RemoteOffsetForTimestamp(ctx context.Context, tp remotelog.TopicPartition, ts int64) (offset, timestamp int64, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.conf().RequestTimeout)
	defer cancel()
	r, err := s.timestampLookup(ctx, tp, ts)
	return r.offset, r.timestamp, r.found, err
}

func (s *Engine) timestampLookup(ctx context.Context, tp remotelog.TopicPartition, ts int64) (tsOffset, error) {
	r, err := retrying(func() (tsOffset, error) {
		offs, fin, err := s.partitionState(tp)
		if err != nil {
			return tsOffset{}, err
		}
		for meta := range fin.from(offs.LogStartOffset) {
			if meta.EndOffset < offs.LogStartOffset || meta.MaxTimestampMs < ts {
				continue
			}
			r, err := s.offsetForTimestamp(ctx, *meta, ts, offs.LogStartOffset)
			if err != nil || r.found {
				return r, err
			}
		}
		return tsOffset{}, nil
	})
	s.noteMissing(err, tp, "timestamp", ts)
	return r, s.unreachable(classify(err))
}

// offsetForTimestamp returns the first record of one copy at or after
// logStart whose timestamp is >= ts, found by the copy's time index and a
// scan from the position it gives.
func (s *Engine) offsetForTimestamp(ctx context.Context, meta remotelog.SegmentMetadata, ts, logStart int64) (tsOffset, error) {
	times, err := s.timeIndex(ctx, meta)
	if err != nil {
		return tsOffset{}, missing(meta, err)
	}
	var pos int64
	if te, ok := index.LookupTime(times, ts); ok {
		offsets, err := s.offsetIndex(ctx, meta)
		if err != nil {
			return tsOffset{}, missing(meta, err)
		}
		if oe, ok := index.LookupOffset(offsets, max(te.Offset, logStart)); ok {
			pos = int64(oe.Position)
		}
	}
	r := s.newSegmentReader(ctx, meta, pos)
	for {
		b, ok, err := r.next()
		if err != nil || !ok {
			return tsOffset{}, missing(meta, err)
		}
		if b.MaxTimestamp < ts || b.LastOffset < logStart {
			continue
		}
		recs, err := r.records(b)
		if err != nil {
			return tsOffset{}, missing(meta, err)
		}
		for _, rec := range recs {
			if rec.Timestamp >= ts && rec.Offset >= logStart {
				return tsOffset{offset: rec.Offset, timestamp: rec.Timestamp, found: true}, nil
			}
		}
	}
}

// records decodes the records of an entry next returned.
func (r *segmentReader) records(b batch.Batch) ([]batch.Record, error) {
	raw, err := r.entry(b)
	if err != nil {
		return nil, err
	}
	return batch.Records(raw, codec.Kafka)
}

// RemoteMaxTimestamp returns the offset and timestamp (ms) of the record
// with the largest timestamp among the finished copies' records at or
// after the log start offset, the first such record when several share it
// (ListOffsets MAX_TIMESTAMP, KIP-734). found is false when no such record
// has a timestamp (magic 0 entries have none). The copies' MaxTimestampMs
// pick the copy, its time index says where to scan, and the records from
// there are decoded; only when the largest timestamp of the copy holding
// the log start offset lies below that offset is the copy scanned whole.
// Errors as RemoteOffsetForTimestamp.
func (s *Engine) RemoteMaxTimestamp(ctx context.Context, tp remotelog.TopicPartition) (offset, timestamp int64, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.conf().RequestTimeout)
	defer cancel()
	r, err := s.maxTimestamp(ctx, tp)
	return r.offset, r.timestamp, r.found, err
}

func (s *Engine) maxTimestamp(ctx context.Context, tp remotelog.TopicPartition) (tsOffset, error) {
	r, err := retrying(func() (tsOffset, error) {
		offs, fin, err := s.partitionState(tp)
		if err != nil {
			return tsOffset{}, err
		}
		lso := offs.LogStartOffset
		var cands []remotelog.SegmentMetadata
		for m := range fin.from(lso) {
			if m.EndOffset >= lso && m.MaxTimestampMs >= 0 {
				cands = append(cands, *m)
			}
		}
		// Largest timestamp first; among equals, offset order (fin's).
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].MaxTimestampMs > cands[j].MaxTimestampMs })
		var best tsOffset
		for _, m := range cands {
			if best.found && (m.MaxTimestampMs < best.timestamp || (m.MaxTimestampMs == best.timestamp && m.StartOffset > best.offset)) {
				break // no copy left can hold a later or earlier-placed maximum
			}
			r, err := s.offsetForTimestamp(ctx, m, m.MaxTimestampMs, lso)
			if err != nil {
				return tsOffset{}, err
			}
			if !r.found || r.timestamp != m.MaxTimestampMs {
				// The copy's largest timestamp is below the log start
				// offset (or its metadata is off): find its largest at or
				// after it.
				if r, err = s.maxFrom(ctx, m, lso); err != nil {
					return tsOffset{}, err
				}
			}
			if r.found && (!best.found || r.timestamp > best.timestamp || (r.timestamp == best.timestamp && r.offset < best.offset)) {
				best = r
			}
		}
		return best, nil
	})
	s.noteMissing(err, tp, "lookup", "max_timestamp")
	return r, s.unreachable(classify(err))
}

// maxFrom scans one copy from offset from to its end for the first record
// with the largest timestamp.
func (s *Engine) maxFrom(ctx context.Context, meta remotelog.SegmentMetadata, from int64) (tsOffset, error) {
	var pos int64
	if from > meta.StartOffset {
		offsets, err := s.offsetIndex(ctx, meta)
		if err != nil {
			return tsOffset{}, missing(meta, err)
		}
		if oe, ok := index.LookupOffset(offsets, from); ok {
			pos = int64(oe.Position)
		}
	}
	r := s.newSegmentReader(ctx, meta, pos)
	best := tsOffset{timestamp: batch.NoTimestamp}
	for {
		b, ok, err := r.next()
		if err != nil || !ok {
			return best, missing(meta, err)
		}
		if b.LastOffset < from || b.MaxTimestamp <= best.timestamp {
			continue
		}
		recs, err := r.records(b)
		if err != nil {
			return tsOffset{}, missing(meta, err)
		}
		for _, rec := range recs {
			if rec.Offset >= from && rec.Timestamp > best.timestamp {
				best = tsOffset{offset: rec.Offset, timestamp: rec.Timestamp, found: true}
			}
		}
	}
}
