package locallog

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
)

// Errors a Partition returns (wrapped); match them with errors.Is.
var (
	// ErrBelowLocalStart: the offset is below the local log start offset;
	// the caller reads the remote tier.
	ErrBelowLocalStart = errors.New("locallog: offset below the local log start offset")
	// ErrSegmentGone: the segment holding the offset was deleted, renamed or
	// is being replaced (a log cleaner swap) while it was read, and a fresh
	// listing no longer has the offset; the caller reads the remote tier.
	ErrSegmentGone = errors.New("locallog: segment deleted while reading")
	// ErrClosed: the Partition was closed.
	ErrClosed = errors.New("locallog: partition closed")
)

// OffsetOutOfRangeError is a read past the served end: Offset is above
// HighWatermark.
type OffsetOutOfRangeError struct {
	Offset, LocalLogStartOffset, HighWatermark int64
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("locallog: offset %d out of range [%d, %d]", e.Offset, e.LocalLogStartOffset, e.HighWatermark)
}

// Options tune a Partition. The zero value serves a directory that nobody
// else bounds: up to the last whole, CRC-valid batch.
type Options struct {
	// HighWatermark, when set, bounds every read and offset (broker-owned
	// log dirs): it returns the broker's high watermark from
	// replication-offset-checkpoint and whether the partition has one.
	// When it returns false, nothing is served from this partition (Offsets
	// reports HighWatermark = LocalLogStartOffset). When nil, the bound is
	// the end of the last whole, CRC-valid batch of the active segment. It
	// is called once per Read and Offsets call and must be cheap and safe
	// for concurrent use.
	HighWatermark func() (int64, bool)
}

// Partition is a read-only view of one partition directory. It is safe for
// concurrent use. See the package doc for what it reads and trusts.
type Partition struct {
	dir  string
	tp   kafkalog.TopicPartition
	opts Options

	mu     sync.Mutex
	cur    *listing
	closed bool

	// testAcquired, when set (tests only), runs after Read took its
	// listing, to change the directory between listing and reading.
	testAcquired func()
}

// Open lists the directory's segments; it reads no segment data. Errors:
// the directory's base name is not a live partition directory name
// ("<topic>-<partition>"), or the directory cannot be listed.
func Open(dir string, opts Options) (*Partition, error) {
	tp, ok := kafkalog.ParsePartitionDir(filepath.Base(dir))
	if !ok {
		return nil, fmt.Errorf("locallog: %s is not a partition directory name (<topic>-<partition>)", dir)
	}
	p := &Partition{dir: dir, tp: tp, opts: opts}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.relistLocked(); err != nil {
		return nil, err
	}
	return p, nil
}

// Dir returns the partition directory.
func (p *Partition) Dir() string { return p.dir }

// TopicPartition returns the topic and partition the directory name gives.
func (p *Partition) TopicPartition() kafkalog.TopicPartition { return p.tp }

// TopicID returns the topic id in partition.metadata (KIP-516), or "" when
// the file is absent. Errors: kafkalog.ErrBadPartitionMetadata (wrapped)
// for a file that is not what a broker writes, I/O.
func (p *Partition) TopicID() (string, error) { return kafkalog.ReadTopicID(p.dir) }

// LeaderEpochs returns the entries of leader-epoch-checkpoint, none when the
// file is absent. Errors: kafkalog.ErrCorrupt (wrapped, naming the file), I/O.
func (p *Partition) LeaderEpochs() ([]epoch.Entry, error) { return epoch.ReadFile(epoch.Path(p.dir)) }

// Close releases the open segment files. Reads in progress finish first;
// later calls return ErrClosed.
func (p *Partition) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.cur != nil {
		p.cur.release()
		p.cur = nil
	}
	return nil
}

// Offsets are the partition's local offsets.
type Offsets struct {
	// LocalLogStartOffset is the base offset of the oldest segment still
	// present (== HighWatermark when the log holds no batch).
	LocalLogStartOffset int64
	// HighWatermark is the served end: the offset after the last served
	// batch.
	HighWatermark int64
	// LastStableOffset is the first offset of the oldest transaction still
	// open in the local log, or HighWatermark.
	LastStableOffset int64
}

// Offsets returns the partition's offsets now. The first call reads the
// batch headers of every local segment once (transaction tracking); later
// calls read only what was appended since. Errors: ErrSegmentGone when
// segments keep vanishing under it, ErrClosed, I/O.
func (p *Partition) Offsets() (o Offsets, err error) {
	err = p.withListing(func(l *listing) error {
		o, err = p.offsets(l)
		return err
	})
	return o, err
}

func (p *Partition) offsets(l *listing) (Offsets, error) {
	hw, err := p.highWatermark(l)
	if err != nil {
		return Offsets{}, err
	}
	lso, err := l.lastStable(hw)
	if err != nil {
		return Offsets{}, err
	}
	return Offsets{LocalLogStartOffset: l.start(), HighWatermark: hw, LastStableOffset: lso}, nil
}

// highWatermark returns the served end for listing l: the end of the last
// whole, CRC-valid batch of the active segment, bounded by the
// Options.HighWatermark when one is set, never below the local log start.
func (p *Partition) highWatermark(l *listing) (int64, error) {
	if len(l.segs) == 0 {
		return 0, nil
	}
	start := l.start()
	bound := int64(math.MaxInt64)
	if p.opts.HighWatermark != nil {
		hw, ok := p.opts.HighWatermark()
		if !ok || hw <= start {
			return start, nil
		}
		bound = hw
	}
	act := l.segs[len(l.segs)-1]
	if bound <= act.base {
		return bound, nil // rolled segments are whole up to the next base
	}
	st, err := act.advance(bound, true)
	if err != nil {
		return 0, err
	}
	if st.byBound {
		return bound, nil
	}
	return st.next, nil
}
