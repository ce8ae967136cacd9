package remoteread

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// This file is the remote tier's Go read API: what the gRPC methods and
// in-process readers (the Kafka listener) share. Each method bounds itself
// by request_timeout and returns the error classes of errors.go.

// RemotePartition is a partition with remote metadata.
type RemotePartition struct {
	TopicPartition remotelog.TopicPartition
	// TopicID is the topic id (KIP-516) of the incarnation the metadata
	// belongs to, in Kafka's base64 form; "" when unknown.
	TopicID string
}

// RemotePartitions returns the partitions that have had something tiered
// (a highest tiered offset >= 0; retention may have deleted every copy
// since), ordered by topic and partition. It reads the metadata store's
// partition list, as the Admin service's ListPartitions does. Errors: the
// metadata store's, ctx's.
func (s *Engine) RemotePartitions(ctx context.Context) ([]RemotePartition, error) {
	tps, err := s.md.Partitions()
	if err != nil {
		return nil, fmt.Errorf("fetch: list partitions: %w", err)
	}
	out := make([]RemotePartition, 0, len(tps))
	for _, tp := range tps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		offs, ok, err := s.md.Offsets(tp)
		if err != nil {
			return nil, fmt.Errorf("fetch: offsets of %s: %w", tp, err)
		}
		if ok && offs.HighestTieredOffset >= 0 {
			out = append(out, RemotePartition{TopicPartition: tp, TopicID: offs.TopicID})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].TopicPartition, out[j].TopicPartition
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	return out, nil
}

// RemoteOffsets returns a partition's offsets as its remote metadata
// records them, and false when it records none (then nothing is tiered).
// HighestTieredOffset is -1 while nothing is tiered. Errors: the metadata
// store's.
func (s *Engine) RemoteOffsets(_ context.Context, tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	offs, ok, err := s.md.Offsets(tp)
	if err != nil {
		return offs, false, fmt.Errorf("fetch: offsets of %s: %w", tp, err)
	}
	return offs, ok, nil
}

// RemoteRead is what ReadRemote returns.
type RemoteRead struct {
	// Records are whole record batches (v2 or legacy message sets), byte
	// for byte as stored, the caller's own copy. Empty only for an offset
	// compacted away at the very end of the tiered log.
	Records []byte
	// Next is the offset after the last returned batch, or
	// HighestTieredOffset+1 when Records is empty.
	Next int64
	// Offsets are the partition's offsets from the metadata snapshot the
	// read used.
	Offsets remotelog.PartitionOffsets

	n     int64    // bytes read
	parts [][]byte // the records as views of cached chunks (gRPC reads)
	hold  *Hold    // holds the chunks of parts; nil when there are none
}

// release lets go of the chunks the read's views hold.
func (rr *RemoteRead) release() {
	if rr.hold != nil {
		rr.hold.Done()
		rr.hold = nil
	}
}

// ReadRemote reads whole record batches from the finished copy holding
// offset, as the Fetch RPC does: from the batch whose last offset is >=
// offset (an offset in a compacted gap reads from the next batch), that
// batch always, even when larger than maxBytes (bytes, capped at
// fetch.max.bytes), then the copy's following batches while the total
// stays within maxBytes and they arrive within remote.fetch.max.wait.ms
// (a load failing after the first batch arrived ends the answer with the
// batches that arrived whole; the failure is logged and counted in
// tierd_fetch_short_answers_total).
// A read starting where another ended is sequential and gets prefetch. A
// read that raced a retention delete starts over with fresh metadata; a
// finished copy found with an object missing is reported to the
// WithMissingCopyHook function. The call is bounded by request_timeout.
//
// Errors (wrapped): ErrInvalidArgument; ErrNotTiered; *RangeError when
// offset is below the log start offset or past the highest tiered offset;
// ErrStillLoading; ErrDataLoss; ctx's; any other is an object store or
// disk failure (retryable).
func (s *Engine) ReadRemote(ctx context.Context, tp remotelog.TopicPartition, offset int64, maxBytes int) (RemoteRead, error) {
	ctx, cancel := context.WithTimeout(ctx, s.conf().RequestTimeout)
	defer cancel()
	rr, err := s.readRemote(ctx, tp, offset, int64(maxBytes), nil)
	if err != nil {
		return rr, err
	}
	// The records are a copy: the caller keeps them as long as it likes,
	// while the chunks' buffers go back to the cache's pool once the pin
	// is released. A copy costs one memmove of the answer; leaving the
	// caller a slice of the chunk instead would keep the whole chunk
	// (remote.fetch.chunk.bytes) out of the pool and alive outside the
	// memory budget for as long as the caller holds any of it, and the
	// next load would allocate and zero a new chunk.
	if rr.n > 0 {
		rr.Records = make([]byte, 0, rr.n)
		for _, p := range rr.parts {
			rr.Records = append(rr.Records, p...)
		}
	}
	rr.parts = nil
	rr.release()
	return rr, nil
}

// retries is how often a read that raced a retention delete starts over
// with fresh metadata.
const retries = 3

// readRemote is ReadRemote without the request timeout, answering with
// views (rr.parts, held until rr.release); with stream set, it passes the
// records to stream as they arrive instead (see segmentReader.readFrom).
func (s *Engine) readRemote(ctx context.Context, tp remotelog.TopicPartition, offset, maxBytes int64, stream streamFunc) (rr RemoteRead, err error) {
	defer s.countFetch(tp, time.Now(), &rr, &err)
	sent := false
	if stream != nil {
		inner := stream
		stream = func(r Run) error { sent = true; return inner(r) }
	}
	for i := 0; i < retries; i++ {
		// A copy deleted by retention after the snapshot was taken reads as
		// a missing object: start over, and the new snapshot says whether
		// the offset is now below the log start offset (unless part of the
		// answer went out already).
		if rr, err = s.read(ctx, tp, offset, maxBytes, stream); !errors.Is(err, rsm.ErrNotFound) || sent {
			break
		}
	}
	if err != nil {
		s.noteMissing(err, tp, "offset", offset)
		return RemoteRead{}, s.unreachable(classify(err))
	}
	return rr, nil
}

// retrying runs fn until it does not fail with a missing object (a copy
// retention deleted after fn's snapshot), at most retries times.
func retrying[T any](fn func() (T, error)) (v T, err error) {
	for i := 0; i < retries; i++ {
		if v, err = fn(); !errors.Is(err, rsm.ErrNotFound) {
			break
		}
	}
	return v, err
}

// partitionState returns, from one snapshot (see metasnap.go), what every
// read needs: the partition's offsets and its finished copies, and
// rejects bad arguments and partitions with nothing tiered.
func (s *Engine) partitionState(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, *finList, error) {
	if tp.Topic == "" || tp.Partition < 0 {
		return remotelog.PartitionOffsets{}, nil, invalidf("topic must be set and partition must be >= 0 (got %q, %d)", tp.Topic, tp.Partition)
	}
	p, err := s.meta.get(tp)
	if err != nil {
		return remotelog.PartitionOffsets{}, nil, err
	}
	if !p.ok || (p.offs.HighestTieredOffset < 0 && p.fin.len() == 0) {
		return p.offs, nil, fmt.Errorf("%w: %s", ErrNotTiered, tp)
	}
	return p.offs, p.fin, nil
}

// prefetchRowsMax bounds the copies after the one read that a read hands
// to prefetch.
const prefetchRowsMax = 1024

// following returns the finished copies after the cursor's that prefetch
// may reach: at least the next one (where a sequential reader goes on),
// then more until their bytes reach remote.fetch.prefetch.max.bytes.
func (s *Engine) following(p finCursor) []remotelog.SegmentMetadata {
	var out []remotelog.SegmentMetadata
	var bytes int64
	for p = p.next(); p.ok() && len(out) < prefetchRowsMax && (len(out) == 0 || bytes < s.conf().PrefetchBytes); p = p.next() {
		out = append(out, *p.row())
		bytes += p.row().SizeInBytes
	}
	return out
}

// read is one attempt of readRemote, on one metadata snapshot.
func (s *Engine) read(ctx context.Context, tp remotelog.TopicPartition, offset, maxBytes int64, stream streamFunc) (RemoteRead, error) {
	if offset < 0 || maxBytes < 0 {
		return RemoteRead{}, invalidf("offset and max_bytes must be >= 0 (got %d, %d)", offset, maxBytes)
	}
	offs, fin, err := s.partitionState(tp)
	if err != nil {
		return RemoteRead{}, err
	}
	if offset < offs.LogStartOffset || offset > offs.HighestTieredOffset {
		return RemoteRead{}, &RangeError{Offset: offset, LogStartOffset: offs.LogStartOffset, HighestTieredOffset: offs.HighestTieredOffset}
	}
	maxBytes = min(maxBytes, int64(s.conf().FetchMaxBytes))
	wait, cancel := context.WithTimeout(ctx, time.Duration(s.conf().MaxWaitMs)*time.Millisecond)
	defer cancel()
	want := offset // the first offset still to find
	// chain names where a read that this one continues ended: the first
	// copy it reads and offset (see afterFetch).
	var chain *seqPos
	// Finished copies are in offset order: start at the first that reaches
	// the offset.
	for p := fin.seek(want); p.ok(); p = p.next() {
		meta := *p.row()
		if meta.EndOffset < want {
			continue
		}
		if meta.StartOffset > want {
			// No copy covers these offsets (a segment deleted locally
			// before it was copied): say so rather than skip them.
			return RemoteRead{}, fmt.Errorf("%w: offsets %d to %d have no tiered copy", ErrDataLoss, want, meta.StartOffset-1)
		}
		offsets, err := s.offsetIndex(wait, meta)
		if err != nil {
			if wait.Err() != nil && ctx.Err() == nil { // our wait ended, not the caller's
				return RemoteRead{}, fmt.Errorf("%w: offset index of %s", ErrStillLoading, meta.ID)
			}
			return RemoteRead{}, missing(meta, err)
		}
		pos, bound := scanBounds(offsets, offset, meta.SizeInBytes)
		if chain == nil {
			chain = &seqPos{meta.ID, offset}
		}
		// A read continuing a sequential reader's chain takes its
		// read-ahead along with a load it makes (see readahead.go).
		ahead := s.demandAhead(s.seq.peek(*chain))
		r := s.newSegmentReader(ctx, meta, pos)
		rr := RemoteRead{Offsets: offs}
		emit := func(parts [][]byte, _ int64, _ *Hold) error { rr.parts = append(rr.parts, parts...); return nil }
		if stream != nil {
			emit = func(parts [][]byte, next int64, h *Hold) error { return stream(Run{parts, next, offs, h}) }
		}
		h, n, next, end, err := r.readFrom(ctx, wait, offset, maxBytes, bound+maxBytes+batch.HeaderSize, upfrontEnd(offsets, pos, maxBytes, meta.SizeInBytes), ahead, stream != nil, emit)
		if err != nil || n == 0 || stream != nil {
			h.Done()
		} else {
			rr.hold = h
		}
		if err != nil {
			return RemoteRead{}, missing(meta, err)
		}
		if n > 0 && r.cut != "" {
			s.m.short.WithLabelValues(r.cut).Inc()
			if r.cutErr != nil {
				s.log.Warn("fetch: answered with the batches that arrived before a load failed", "topic", tp.Topic,
					"partition", tp.Partition, "offset", offset, "next_offset", next, "bytes", n, "err", r.cutErr)
			}
		}
		if n > 0 {
			s.afterFetch(meta, *chain, next, end-n, end, s.following(p))
			rr.n, rr.Next = n, next
			return rr, nil
		}
		want = meta.EndOffset + 1 // compacted away to the segment's end
	}
	// Only offsets compacted away at the very end of the tiered log remain.
	return RemoteRead{Next: offs.HighestTieredOffset + 1, Offsets: offs}, nil
}

// scanBounds returns where the scan for offset starts (the position of
// the largest index entry at or below it, or 0) and a bound on where the
// first batch to return starts: the next entry's position (an entry names
// a batch's last offset, so the batch holding offset starts at or before
// the next entry's batch), or the segment's size.
func scanBounds(offsets []index.OffsetEntry, offset, size int64) (pos, bound int64) {
	i := sort.Search(len(offsets), func(i int) bool { return offsets[i].Offset > offset })
	if i > 0 {
		pos = int64(offsets[i-1].Position)
	}
	bound = size
	if i < len(offsets) {
		bound = int64(offsets[i].Position)
	}
	return pos, bound
}

// upfrontEnd returns the file position up to which a unary read from pos
// (a batch start) with max_bytes maxBytes waits at once: the segment's
// end (size) when it lies within maxBytes of pos, as every batch from pos
// on is then in the answer; else the start of the last batch the offset
// index names (offsets) within maxBytes of pos, which the answer holds or
// which is the first batch it leaves out (a batch the answer leaves out
// ends more than maxBytes past pos, so no batch starts after it within
// them), so that the read never waits for the body of a batch it does not
// send; pos (no wait) when the index names none.
func upfrontEnd(offsets []index.OffsetEntry, pos, maxBytes, size int64) int64 {
	if size-pos <= maxBytes {
		return size
	}
	lim := pos + maxBytes
	i := sort.Search(len(offsets), func(i int) bool { return int64(offsets[i].Position) > lim })
	if i > 0 && int64(offsets[i-1].Position) > pos {
		return int64(offsets[i-1].Position)
	}
	return pos
}

// RemoteLeaderEpochs returns the leader-epoch lineage that the finished
// copies' metadata records (their SegmentLeaderEpochs), merged: ascending
// by epoch, each epoch once, with the smallest start offset seen. It reads
// metadata only. Errors (wrapped): ErrInvalidArgument, ErrNotTiered, the
// metadata store's.
func (s *Engine) RemoteLeaderEpochs(_ context.Context, tp remotelog.TopicPartition) ([]epoch.Entry, error) {
	_, fin, err := s.partitionState(tp)
	if err != nil {
		return nil, err
	}
	var out []epoch.Entry
	for m := range fin.all() {
		out = append(out, m.SegmentLeaderEpochs...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Epoch != out[j].Epoch {
			return out[i].Epoch < out[j].Epoch
		}
		return out[i].StartOffset < out[j].StartOffset
	})
	merged := out[:0]
	for _, e := range out {
		if len(merged) == 0 || merged[len(merged)-1].Epoch != e.Epoch {
			merged = append(merged, e)
		}
	}
	return merged, nil
}
