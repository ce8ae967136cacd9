package rlmm

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tierd/tierd/internal/remotelog"
)

// Change tracking. Every write to a partition's rows or offsets takes the
// next number of a store-wide write clock as the partition's generation,
// and leaves its effect on the finished rows and offsets (a
// remotelog.Change, the values written) in an in-memory log. A reader
// that keeps a copy of a partition's finished rows (the remote read engine's
// per-partition snapshots) asks PartitionVersion whether the partition
// changed, which costs one map look-up, and ChangesSince for the changes
// to apply, so that it never decodes rows it already has. The log keeps
// the newest changeLogSize changes of the whole store; a reader further
// behind, a write that failed (its effect is unknown), or a write that
// changed too many rows to keep (a scheduled or cancelled partition
// deletion) makes the reader reload the partition (FinishedSnapshot).
//
// The log lives in this process only: tierd's remote read engine reads the
// store it shares the process with (Pebble's lock keeps other processes
// out of the directory), so no other reader needs it.

// changeLogSize is how many changes the store keeps for ChangesSince.
const changeLogSize = 16384

// changeRowsMax is the most finished rows a change keeps; a write of more
// makes readers reload the partition.
const changeRowsMax = 256

// changeLog is the store's record of recent changes.
type changeLog struct {
	mu    sync.RWMutex
	clock uint64 // the last generation handed out
	parts map[remotelog.TopicPartition]*partLog
	ring  []ringRef // the newest changeLogSize changes, oldest overwritten first
	next  int
	size  int // the ring's length; changeLogSize unless a test sets it
	epoch atomic.Pointer[epochOf]
}

// partLog is one partition's generation and kept changes.
type partLog struct {
	gen   uint64 // the partition's last change; 0 when none in this process
	floor uint64 // changes up to floor are gone: readers at an older version reload
	log   []genChange
}

type genChange struct {
	gen uint64
	remotelog.Change
}

// ringRef names a change in the ring, so that the oldest can be dropped.
type ringRef struct {
	p   *partLog
	gen uint64
}

// epochOf numbers a Pebble instance.
type epochOf struct {
	in *instance
	n  uint64
}

// epochNow returns the number of instance in, giving it the next number
// when it is new.
func (c *changeLog) epochNow(in *instance) uint64 {
	for {
		cur := c.epoch.Load()
		if cur != nil && cur.in == in {
			return cur.n
		}
		n := uint64(1)
		if cur != nil {
			n = cur.n + 1
		}
		if c.epoch.CompareAndSwap(cur, &epochOf{in: in, n: n}) {
			return n
		}
	}
}

// record gives tp the next generation and keeps ch; a nil ch (the
// write's effect unknown) or one with too many rows drops the partition's
// kept changes instead, so readers reload it. Callers hold s.mu, so that
// generations follow the order of the writes.
func (c *changeLog) record(tp remotelog.TopicPartition, ch *remotelog.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts == nil {
		c.parts = map[remotelog.TopicPartition]*partLog{}
	}
	c.clock++
	p := c.parts[tp]
	if p == nil {
		p = &partLog{}
		c.parts[tp] = p
	}
	p.gen = c.clock
	if ch == nil || len(ch.Finished) > changeRowsMax {
		clear(p.log)
		p.log, p.floor = p.log[:0], p.gen
		return
	}
	p.log = append(p.log, genChange{gen: p.gen, Change: *ch})
	if c.ring == nil {
		if c.size <= 0 {
			c.size = changeLogSize
		}
		c.ring = make([]ringRef, c.size)
	}
	if old := c.ring[c.next]; old.p != nil && len(old.p.log) > 0 && old.p.log[0].gen == old.gen {
		old.p.log[0] = genChange{}
		old.p.log, old.p.floor = old.p.log[1:], old.gen
	}
	c.ring[c.next] = ringRef{p: p, gen: p.gen}
	c.next = (c.next + 1) % len(c.ring)
}

// PartitionVersion returns the version of tp's finished rows and offsets
// as this store has them: a new one after every write to the partition's
// rows or offsets, and after the store reopened its Pebble instance. It
// takes no I/O (one map look-up under a read lock).
func (s *Store) PartitionVersion(tp remotelog.TopicPartition) remotelog.Version {
	v := remotelog.Version{Epoch: s.changes.epochNow(s.inst.Load())}
	s.changes.mu.RLock()
	if p := s.changes.parts[tp]; p != nil {
		v.Gen = p.gen
	}
	s.changes.mu.RUnlock()
	return v
}

// ChangesSince returns the changes of tp's finished rows and offsets made
// after version since, oldest first, and the version they lead to; ok is
// false when they are not all kept any more (reload with
// FinishedSnapshot). It takes no I/O. The changes are shared: read them,
// never modify them.
func (s *Store) ChangesSince(tp remotelog.TopicPartition, since remotelog.Version) (changes []remotelog.Change, now remotelog.Version, ok bool) {
	now.Epoch = s.changes.epochNow(s.inst.Load())
	if since.Epoch != now.Epoch {
		return nil, now, false
	}
	s.changes.mu.RLock()
	defer s.changes.mu.RUnlock()
	p := s.changes.parts[tp]
	if p == nil {
		return nil, now, since.Gen == 0
	}
	now.Gen = p.gen
	if since.Gen < p.floor || since.Gen > p.gen {
		return nil, now, false
	}
	i := sort.Search(len(p.log), func(i int) bool { return p.log[i].gen > since.Gen })
	for _, c := range p.log[i:] {
		changes = append(changes, c.Change)
	}
	return changes, now, true
}

// FinishedSnapshot returns tp's version, its offsets (false when none are
// recorded) and every finished row, those Supersede would drop included,
// ordered by start offset and then segment id, read from one Pebble
// snapshot. The version is taken before the snapshot, so the rows are at
// least that new: a reader applying the changes since the version to them
// may apply a change they already hold, which changes nothing. Errors:
// Pebble's, a row that does not decode.
func (s *Store) FinishedSnapshot(tp remotelog.TopicPartition) (remotelog.Version, remotelog.PartitionOffsets, bool, []remotelog.SegmentMetadata, error) {
	v := s.PartitionVersion(tp)
	db, done := s.read()
	defer done()
	snap := db.NewSnapshot()
	defer snap.Close()
	off, ok, err := readOffsets(snap, tp)
	if err != nil {
		return v, off, ok, nil, err
	}
	rows, err := scanRows(snap, finishedPrefix(tp))
	return v, off, ok, rows, err
}

// commitSynced commits b, synced, counting the write.
func (s *Store) commitSynced(b *pebble.Batch) error {
	s.syncedWrites.Inc()
	return s.commit(b)
}

// commitChange commits b, synced, and records its effect on tp: ch, or,
// when the write failed (whether it reached the disk is unknown) or ch
// is nil, a change that makes readers reload the partition. Callers hold
// s.mu.
func (s *Store) commitChange(b *pebble.Batch, tp remotelog.TopicPartition, ch *remotelog.Change) error {
	err := s.commitSynced(b)
	if err != nil {
		ch = nil
	}
	s.changes.record(tp, ch)
	return err
}

// finishedSet is the change that sets one finished row.
func finishedSet(meta remotelog.SegmentMetadata, off *remotelog.PartitionOffsets) *remotelog.Change {
	return &remotelog.Change{Offsets: off, Finished: []remotelog.FinishedOp{{StartOffset: meta.StartOffset, ID: meta.ID, Row: &meta}}}
}
