package remoteread

import (
	"context"
	"fmt"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// This file is what the gRPC edge (package grpcapi) reads with besides the
// Go read API: reads answered as views of cached chunks, which the edge
// hands to the transport without a copy, and a partition's offsets and
// rows as they stand.

// Run is a run of whole record batches of a streamed read (ReadViews with
// a stream function), with the offsets of the metadata snapshot the read
// used. Parts are consecutive bytes of one copy, views of cached chunks
// valid while Hold is held: a receiver keeping them past its return calls
// Hold.Add, and Hold.Done when done with them. The receiver must not keep
// the Parts slice itself, which the engine reuses.
type Run struct {
	Parts [][]byte
	// Next is the offset after the run's last batch.
	Next    int64
	Offsets remotelog.PartitionOffsets
	Hold    *Hold
}

// streamFunc receives a streamed read's runs, in order.
type streamFunc func(Run) error

// Views is a read answered as views of cached chunks (ReadViews).
type Views struct {
	// Parts are the records, as ReadRemote's Records, in views of cached
	// chunks (one per chunk); empty when streamed (see Run).
	Parts [][]byte
	// Bytes is the length of the records, streamed or not; 0: none.
	Bytes int64
	// Next and Offsets are RemoteRead's.
	Next    int64
	Offsets remotelog.PartitionOffsets
	// Hold holds Parts' chunks until its Done (nil: nothing held).
	Hold *Hold
}

// ReadViews is ReadRemote without its request timeout (the caller bounds
// ctx) and without the copy: the records are views of cached chunks,
// which the caller lets go of with v.Hold.Done. With stream set, the
// records go to stream as their bytes arrive instead (a run before each
// wait for bytes not yet arrived; see Run), and a read that raced a
// retention delete starts over only while stream has been passed nothing;
// an error stream returns ends the read with that error. Limits, read-ahead
// and errors are ReadRemote's.
func (s *Engine) ReadViews(ctx context.Context, tp remotelog.TopicPartition, offset, maxBytes int64, stream func(Run) error) (Views, error) {
	rr, err := s.readRemote(ctx, tp, offset, maxBytes, stream)
	if err != nil {
		return Views{}, err
	}
	return Views{Parts: rr.parts, Bytes: rr.n, Next: rr.Next, Offsets: rr.Offsets, Hold: rr.hold}, nil
}

// TieredOffsets returns the partition's offsets from the metadata snapshot
// reads use. Errors (wrapped): ErrInvalidArgument; ErrNotTiered (no
// remote metadata, or no finished copy and nothing tiered); the metadata
// store's.
func (s *Engine) TieredOffsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, error) {
	offs, _, err := s.partitionState(tp)
	return offs, err
}

// RemoteSegments returns the partition's offsets and every metadata row
// (copies in any state), read from the metadata store itself rather than
// the reads' snapshot. Errors (wrapped): ErrInvalidArgument; ErrNotTiered
// (no offsets recorded); the metadata store's.
func (s *Engine) RemoteSegments(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, []remotelog.SegmentMetadata, error) {
	if tp.Topic == "" || tp.Partition < 0 {
		return remotelog.PartitionOffsets{}, nil, invalidf("topic must be set and partition must be >= 0 (got %q, %d)", tp.Topic, tp.Partition)
	}
	offs, ok, err := s.md.Offsets(tp)
	if err != nil {
		return offs, nil, err
	}
	if !ok {
		return offs, nil, fmt.Errorf("%w: %s", ErrNotTiered, tp)
	}
	rows, err := s.md.Segments(tp)
	if err != nil {
		return offs, nil, err
	}
	return offs, rows, nil
}

// RequestTimeout is request_timeout as it stands (Reconfigure changes it).
func (s *Engine) RequestTimeout() time.Duration { return s.conf().RequestTimeout }
