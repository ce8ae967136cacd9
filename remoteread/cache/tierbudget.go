package cache

import (
	"errors"
	"fmt"
)

// ErrDiskTierStatic refuses a budget change that would turn the disk tier
// on or off: that needs a restart (the tier's directory is scanned when
// the cache opens).
var ErrDiskTierStatic = errors.New("cache: turning the disk tier on or off (remote.fetch.chunk.cache.disk.bytes to or from 0) needs a restart")

// SetBudgets changes the memory and disk budgets of a running cache,
// bytes (remote.fetch.chunk.cache.memory.bytes and .disk.bytes, as a
// reload gives them; Kafka's remote.log.index.file.cache.total.size.bytes
// is dynamic the same way). The shared prefetch budget in force follows
// the memory budget: remote.fetch.prefetch.budget.bytes, at most half
// the memory budget (prefetched bytes held above a smaller limit stay
// until read, evicted or expired; new prefetches wait for room). A
// smaller budget evicts chunks down to it at once, in the memory tier's
// order (least recently used first, unread prefetched chunks last): in
// memory, chunks a reader holds (a Pin, a View under way) stay readable
// to it and are only dropped from the cache (their buffers go back to
// the pool when the last holder lets go); on disk, an evicted chunk's file is removed, and a reader
// that has it open reads on. Loads in flight count against the new
// memory budget, so new loads wait until they fit (one load may always
// start). diskBytes is ignored without a disk tier when it is 0. Errors:
// a memory budget below two chunks, a negative disk budget,
// ErrDiskTierStatic; then nothing changes.
func (c *Cache) SetBudgets(memoryBytes, diskBytes int64) error {
	var errs []error
	if memoryBytes < 2*c.cfg.ChunkBytes {
		errs = append(errs, fmt.Errorf("cache: remote.fetch.chunk.cache.memory.bytes %d must be at least two chunks (%d)", memoryBytes, 2*c.cfg.ChunkBytes))
	}
	if diskBytes < 0 {
		errs = append(errs, fmt.Errorf("cache: remote.fetch.chunk.cache.disk.bytes %d must not be negative", diskBytes))
	} else if (c.disk != nil) != (diskBytes > 0) && (c.disk != nil || c.cfg.DiskDir != "") {
		errs = append(errs, ErrDiskTierStatic)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.pfLimits(memoryBytes)
	c.mem.setBudget(memoryBytes)
	if c.disk != nil {
		c.disk.setBudget(diskBytes)
	}
	return nil
}

// Budgets returns the memory and disk budgets in force, bytes (disk 0
// without a disk tier).
func (c *Cache) Budgets() (memoryBytes, diskBytes int64) {
	c.mem.mu.Lock()
	memoryBytes = c.mem.budget
	c.mem.mu.Unlock()
	if c.disk != nil {
		c.disk.mu.Lock()
		diskBytes = c.disk.budget
		c.disk.mu.Unlock()
	}
	return memoryBytes, diskBytes
}

// setBudget changes the memory tier's budget, evicting down to it, and
// wakes the loads waiting for room.
func (l *lru) setBudget(budget int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.budget = budget
	l.evict()
	l.room.Broadcast()
}

// setBudget changes the disk tier's budget, removing the least recently
// used files down to it.
func (d *disk) setBudget(budget int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.budget = budget
	d.evict()
}
