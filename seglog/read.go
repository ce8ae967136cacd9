package seglog

import (
	"context"
	"errors"
	"sort"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// Read returns whole batches, as they are on disk, starting with the batch
// whose last offset is >= offset: that first batch always, even when it is
// larger than maxBytes, then following batches of the same segment while
// the total stays within maxBytes (bytes). An offset that falls in a gap
// (compacted away) reads from the next batch, in the next segment when
// needed. Reading at the high watermark returns no bytes and no error.
// Errors: *OffsetOutOfRangeError below the log start offset or past the
// high watermark, ErrClosed, I/O errors, and corruption errors (wrapping
// kafkalog.ErrCorrupt) naming the segment file.
//
// With a remote reader (WithRemote), offsets below the local log start
// offset are read from the remote tier, and out-of-range errors come from
// it.
func (l *Log) Read(offset int64, maxBytes int) ([]byte, error) {
	return l.ReadContext(context.Background(), offset, maxBytes)
}

// ReadContext is Read with a context for the remote tier.
func (l *Log) ReadContext(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	l.maybeRefresh()
	l.mu.RLock()
	if localStart := l.segs[0].base; l.remote != nil && !l.closed && offset < localStart {
		l.mu.RUnlock()
		data, err := l.remote.ReadRemote(ctx, offset, maxBytes)
		if err != nil || len(data) > 0 {
			return data, err
		}
		// The rest of the tiered range was compacted away: the next batch
		// is the first local one.
		return l.readLocal(localStart, maxBytes)
	}
	defer l.mu.RUnlock()
	return l.readLocked(offset, maxBytes)
}

func (l *Log) readLocal(offset int64, maxBytes int) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.readLocked(offset, maxBytes)
}

func (l *Log) readLocked(offset int64, maxBytes int) ([]byte, error) {
	if l.closed {
		return nil, ErrClosed
	}
	start, end := l.segs[0].base, l.active().nextOffset
	if offset < start || offset > end {
		return nil, &OffsetOutOfRangeError{Offset: offset, Start: start, End: end}
	}
	for i := l.segmentFor(offset); i < len(l.segs); i++ {
		data, err := readSegment(l.segs[i], offset, maxBytes)
		if err != nil || len(data) > 0 {
			return data, err
		}
	}
	return nil, nil
}

// segmentFor returns the index of the last segment whose base offset is <=
// offset (0 when offset is below every base).
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	return max(i-1, 0)
}

// readSegment reads from one segment as Read describes, or nothing when the
// segment holds no batch ending at or after offset.
func readSegment(s *segment, offset int64, maxBytes int) ([]byte, error) {
	var pos int64
	if e, ok := index.LookupOffset(s.idx.Offsets, offset); ok {
		pos = int64(e.Position)
	}
	sc := batch.NewScanner(s.log, s.size, batch.ScanOptions{Start: pos})
	from, to := int64(-1), int64(-1)
	for sc.Next() {
		b := sc.Batch()
		if from < 0 {
			if b.LastOffset >= offset {
				from, to = b.Position, b.End()
			}
			continue
		}
		if b.End()-from > int64(maxBytes) {
			break
		}
		to = b.End()
	}
	if err := sc.Err(); err != nil && from < 0 { // after a first batch, the next Read reports it
		return nil, kafkalog.WithFile(err, s.path(kafkalog.LogSuffix))
	}
	if from < 0 {
		return nil, nil
	}
	out := make([]byte, to-from)
	if _, err := s.log.ReadAt(out, from); err != nil {
		return nil, err
	}
	return out, nil
}

// OffsetForTimestamp returns the first offset whose record timestamp is >=
// ts (ms), and that record's timestamp, as ListOffsets by timestamp does:
// the first segment whose max timestamp reaches ts, located through its time
// and offset indexes, then scanned record by record. Errors:
// ErrNoTimestampFound when no record is that late, ErrClosed, I/O and
// corruption errors.
//
// With a remote reader the local tier is searched first, then the remote
// one, whose answer wins when it has one: segments only leave local disk
// after their copy finished, so the two searches together cover the whole
// log even when a segment moves from local to remote between them.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, err error) {
	off, t, err := l.localOffsetForTimestamp(ts)
	if l.remote == nil || (err != nil && !errors.Is(err, ErrNoTimestampFound)) {
		return off, t, err
	}
	roff, rt, found, rerr := l.remote.RemoteOffsetForTimestamp(context.Background(), ts)
	if rerr != nil {
		return 0, 0, rerr
	}
	if found {
		return roff, rt, nil
	}
	return off, t, err
}

func (l *Log) localOffsetForTimestamp(ts int64) (offset, timestamp int64, err error) {
	l.maybeRefresh()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, 0, ErrClosed
	}
	for _, s := range l.segs {
		if s.maxTimestamp() < ts {
			continue
		}
		off, t, found, err := offsetForTimestamp(s, ts)
		if err != nil || found {
			return off, t, err
		}
	}
	return 0, 0, ErrNoTimestampFound
}

func offsetForTimestamp(s *segment, ts int64) (offset, timestamp int64, found bool, err error) {
	var pos int64
	if te, ok := index.LookupTime(s.idx.Times, ts); ok {
		if oe, ok := index.LookupOffset(s.idx.Offsets, te.Offset); ok {
			pos = int64(oe.Position)
		}
	}
	sc := batch.NewScanner(s.log, s.size, batch.ScanOptions{Start: pos})
	for sc.Next() {
		b := sc.Batch()
		if b.MaxTimestamp < ts {
			continue
		}
		raw, err := sc.Raw()
		if err != nil {
			return 0, 0, false, err
		}
		recs, err := batch.Records(raw, codec.Kafka)
		if err != nil {
			return 0, 0, false, kafkalog.WithFile(err, s.path(kafkalog.LogSuffix))
		}
		for _, r := range recs {
			if r.Timestamp >= ts {
				return r.Offset, r.Timestamp, true, nil
			}
		}
	}
	return 0, 0, false, kafkalog.WithFile(sc.Err(), s.path(kafkalog.LogSuffix))
}
