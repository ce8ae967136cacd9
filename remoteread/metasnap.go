package remoteread

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/remotelog"
)

// Per-partition metadata snapshots. Each partition a read touches gets a
// snapshot of its offsets and finished rows (partSnap), kept for the
// next read. A read asks the metadata store for the partition's version
// (one map look-up, no I/O) and uses the snapshot as it is while the
// version is the snapshot's: writes to other partitions never touch it.
// When the partition changed, the snapshot is updated with the changes
// the store kept (the rows written, never decoded again) into a new
// snapshot that shares what did not change; only when the store no longer
// has every change (see rlmm.Store.ChangesSince) is the partition read
// and decoded whole. Snapshots are immutable, so a read holds one for its
// whole length while others move on.

// partSnap is one partition's metadata as of one version: what every read
// of the partition needs, from one instant.
type partSnap struct {
	ver  remotelog.Version
	offs remotelog.PartitionOffsets
	ok   bool // offsets are recorded
	fin  *finList
}

// metaCache holds the snapshots: one per partition read that has
// offsets or rows recorded (a deleted partition's goes at its next read).
type metaCache struct {
	md    Metadata
	mu    sync.RWMutex
	parts map[remotelog.TopicPartition]*metaEntry
	// loads counts snapshots read whole (every finished row decoded);
	// updates, snapshots brought up to date from the store's changes.
	loads, updates prometheus.Counter
	rowsDecoded    atomic.Int64 // finished rows decoded by loads, for tests
}

// metaEntry is one partition's snapshot; mu lets one caller at a time
// bring it up to date while readers of the current one go on.
type metaEntry struct {
	mu   sync.Mutex
	snap atomic.Pointer[partSnap]
}

func newMetaCache(md Metadata, f promauto.Factory) *metaCache {
	return &metaCache{md: md, parts: map[remotelog.TopicPartition]*metaEntry{},
		loads: f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_metadata_loads_total",
			Help: "Per-partition metadata snapshots read whole from the metadata store (a partition's first read, or one the store's change log no longer reaches)."}),
		updates: f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_metadata_updates_total",
			Help: "Per-partition metadata snapshots brought up to date from the rows written since, without reading the others."}),
	}
}

func (c *metaCache) entry(tp remotelog.TopicPartition) *metaEntry {
	c.mu.RLock()
	e := c.parts[tp]
	c.mu.RUnlock()
	if e != nil {
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e = c.parts[tp]; e == nil {
		e = &metaEntry{}
		c.parts[tp] = e
	}
	return e
}

// get returns tp's snapshot as of now: the cached one when the partition
// has not changed, else one updated from the changes, else one read
// whole. Errors: the metadata store's.
func (c *metaCache) get(tp remotelog.TopicPartition) (*partSnap, error) {
	v := c.md.PartitionVersion(tp)
	e := c.entry(tp)
	if p := e.snap.Load(); p != nil && p.ver == v {
		return p, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.snap.Load()
	if p != nil {
		changes, now, ok := c.md.ChangesSince(tp, p.ver)
		if ok {
			if now != p.ver {
				p = p.apply(now, changes)
				e.snap.Store(p)
				c.updates.Inc()
			}
			return p, nil
		}
	}
	ver, offs, ok, rows, err := c.md.FinishedSnapshot(tp)
	if err != nil {
		return nil, fmt.Errorf("fetch: metadata of %s: %w", tp, err)
	}
	p = &partSnap{ver: ver, offs: offs, ok: ok, fin: newFinList(rows)}
	c.loads.Inc()
	c.rowsDecoded.Add(int64(len(rows)))
	if !ok && len(rows) == 0 {
		// Nothing recorded (a name no partition has, or one whose
		// deletion is scheduled): keep nothing, so that reads of made-up
		// names cost no memory.
		c.mu.Lock()
		if c.parts[tp] == e {
			delete(c.parts, tp)
		}
		c.mu.Unlock()
		return p, nil
	}
	e.snap.Store(p)
	return p, nil
}

// apply returns the snapshot with changes applied, as of version ver.
func (p *partSnap) apply(ver remotelog.Version, changes []remotelog.Change) *partSnap {
	out := &partSnap{ver: ver, offs: p.offs, ok: p.ok, fin: p.fin}
	var ops []remotelog.FinishedOp
	for _, ch := range changes {
		if ch.Offsets != nil {
			out.offs, out.ok = *ch.Offsets, true
		}
		ops = append(ops, ch.Finished...)
	}
	out.fin = p.fin.apply(ops)
	return out
}
