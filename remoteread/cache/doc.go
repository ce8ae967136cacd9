// Package cache keeps remote segment bytes in fixed-size, aligned chunks,
// in memory and on local disk, each with a byte budget and LRU eviction,
// so that a read whose chunks are cached makes no GET at all.
//
// # Chunks
//
// Object bytes [i*ChunkBytes, (i+1)*ChunkBytes) form chunk i of that object;
// the last chunk of an object may be shorter. A reader asks for the chunks
// covering its range; concurrent misses for the same chunk share one load
// (single flight).
//
// A chunk first read in its middle is loaded from that byte on, at least
// a quarter chunk (at most 1 MiB), so that a cold random read costs about
// one GET of its own bytes. A read going on past the cached part of a
// chunk loads a part twice as long (up to the chunk's end), the cached
// part copied into the new buffer rather than loaded again; a read elsewhere in a partly cached
// chunk loads its own bytes only (the memory tier keeps the larger part).
// A sequential reader whose caller bounds its read-ahead (Cache.PinAhead,
// the engine's window of an eighth of what the reader has taken) loads the
// bytes asked and that read-ahead instead, never a part twice as long. A
// read going on past a part that a load in flight fills extends that
// part once it is in, rather than fetching its bytes again beside it.
// A load fills its buffer as the body arrives, each read of the body
// asking for all the bytes still missing, and a reader returns as soon as
// its bytes are in. Loads run on their own, not under the request that
// started them, at most MaxInflightGets at once.
//
// # Buffers
//
// A load's buffer comes from a pool when one is free (not zeroed: the
// load overwrites every byte): whole chunks' buffers, and parts' buffers
// by capacity in steps of 1/256 chunk (a cold read's part of about
// max_bytes reuses the buffer of an earlier one instead of allocating,
// zeroing and, on a heap that grows, page-faulting a new one; the memory
// budget counts a buffer's capacity). A part loaded for a reader that is
// read ahead for (PinAhead, PrefetchPart) gets room to the chunk's end
// (from the start of a chunk, a pooled whole chunk's buffer), and the
// part that extends it next grows in place: its load writes after the
// older part's bytes in the same buffer, which the older part's readers
// never look at, so that a reader going on through a chunk in windows
// copies nothing and allocates one buffer (copying each window's part
// into a new one, and allocating it, took 40% of tierd's CPU for one
// sequential reader: 2.2 CPU-s per GiB against 1.1 in place). Only one
// part grows in place from another (a reader may still hold bytes a
// failed one wrote there); a part grown in place holds its base, so that
// the buffer goes back to the pool only once neither is used, and a
// slice of it that escapes keeps both out of the pool. A slot (a loaded part) counts its
// holders in one reference count: the cache while the memory tier has it,
// its load until the disk write ends, each Pin (one reference per pinned
// slot, dropped by Pin.Release, which is idempotent) and each View or
// Read while it runs. Its buffer goes back to the pool when the last
// holder lets go and no slice of it went out for good. Cache.Pinned
// counts the Pins not yet released.
//
// Slices leave the cache three ways: a Pin's views (Pin.View, Pin.Slices)
// are valid until Release (fetch's gRPC answers hold their Pin until gRPC
// has written the bytes); Cache.Read copies, so its result is the
// caller's for good and the chunk stays poolable; Cache.View's
// single-chunk answer is a slice nobody gives back, so it marks the slot
// escaped and that buffer is left to the garbage collector.
//
// # Prefetch
//
// Prefetch (Cache.Prefetch) loads whole chunks ahead of sequential readers
// (not those the disk tier holds whole: a read takes them from there),
// PrefetchPart a part of one (a reader's read-ahead window, extending the
// part cached or loading before it; CoveredTo says how far from a byte
// the cache holds the bytes), under admission control; a prefetch that
// does not fit is skipped, never queued, and the caller tries again at
// its reader's next read:
//   - one budget, PrefetchBudgetBytes (at most half of MemoryBytes), is
//     shared by all readers: bytes of prefetch loads in flight plus
//     prefetched bytes no demand read has used yet;
//   - prefetches hold at most MaxInflightGets-1 GET slots, so a demand
//     read always finds one soon, and a demand read waiting for a slot
//     gets it before a later prefetch (Go channel senders queue in order);
//   - a prefetch's memory is taken only when the loads in flight, the
//     unread prefetched bytes and it fit the memory budget together.
//
// The memory tier evicts unread prefetched chunks last, only when a
// demand load needs their room. A prefetched chunk leaves the budget when
// a demand read first uses it, when it is evicted, when its load fails,
// or when it expires: still unread after the cache has loaded a memory
// budget's worth of bytes since it was admitted or, for one made for a
// Reader (PrefetchFor; fetch makes one per sequential reader), since that
// reader last read (Cache.Active): its reader has most likely moved away.
// Counting from the admission alone expired the prefetches of readers
// that were still reading whenever several read at once (8 sequential
// readers loaded the memory budget's worth between admitting a chunk and
// reaching it; 2.5 GB of 8.6 GB loaded expired so, then were evicted
// and loaded again).
// tierd_cache_prefetch_wasted_bytes_total counts the bytes that left
// unread, by why.
//
// # Crowded readers
//
// Each sequential reader holds its current chunk in the memory tier from
// one read to the next, and at least the next one read ahead. When more
// sequential Readers are active (read within the last second, see
// crowd.go) than the memory budget holds two chunks for, those chunks are
// evicted between two reads of their reader and loaded again: the cache
// is crowded. Then every load takes what a
// cold random read takes (from the byte asked for, at least minLoad; a
// read going on past a cached part loads its own bytes rather than a part
// twice as long) and no prefetch starts (PrefetchSkipped, reason
// "crowded"; such an attempt still expires the unread prefetches of
// readers that stopped, so that they do not keep their budget and
// memory for the crowd's length). With fewer readers nothing changes.
//
// # Choosing the defaults
//
// Measured with fetch's BenchmarkReaders and BenchmarkReadersSweep: a
// 512 MiB partition (16 KiB records, 64 MiB segments) on a local MinIO,
// read in process (ReadRemote, max_bytes 1 MiB) by N cold readers, memory
// budget 256 MiB, on a 2-core machine shared with other work (load
// average 13-27 during the runs, so MiB/s varied up to 5x between
// repeats of one case and is not used to choose; fetched/served, counts,
// is). Sequential readers each read 1/N of the log; random readers make
// 256 reads of 1 MiB in all.
//
//	fetched/served           before (4 MiB, 16 MiB)   before (16 MiB, 64 MiB)   now (16 MiB, 64 MiB, 2 GETs)
//	sequential N=1           1.00                     1.00                      1.00
//	sequential N=8           1.25                     1.47                      1.26
//	sequential N=32          1.49                     1.38                      1.22
//	sequential N=64          1.47                     1.13                      1.37 (about 0.18 of it the tail below)
//	random N=1..64           1.78-1.84                3.4-5.5                   1.01-1.12
//
// "before" is the cache without these changes at its old defaults and at
// the new chunk size and depth. The sweep (chunk 4, 8, 16 MiB; depth 16,
// 64 MiB; 1, 2, 4 GETs per reader; 8 and 64 sequential, 32 random
// readers) gave fetched/served 1.05-1.30 for 4 MiB chunks and 1.17-1.67
// for 16 MiB ones, most of the difference being the benchmark's tail: a
// sequential reader stops at the end of its share, and what was
// prefetched past it (one depth per reader, for bytes another reader had
// read long before) counts as fetched; readers that stop at the log's
// end, where prefetch stops, do not pay it (remoteread's
// TestSequentialReadersFetchLittleExtra: 1.12 for 8 readers of their own
// partitions). 16 MiB chunks were chosen for a quarter of the GETs per
// byte (requests are what object stores charge and what adds latency),
// 64 MiB depth (four chunks) for a reader's read-ahead on a store with
// latency, and 2 GETs per reader so that one reader overlaps two; the
// shared budget (128 MiB, half the memory budget) is what bounds many
// readers together. Allocations per round fell about 60% for 1 and 8
// sequential readers (fewer, larger loads) and rose 10-25% for 64
// sequential and for random readers (more, smaller loads); bytes
// allocated fell 13% for one sequential reader and 40% for random ones
// (fewer bytes fetched) but rose about 50% for 64 sequential readers:
// answers served through ReadRemote were then slices of the chunks (they
// escaped, so those buffers were never pooled; ReadRemote now copies its
// answer and the chunks stay poolable), and a read going on past a
// cached part copies it into a new, larger buffer.
//
// The read-ahead window (the engine's: an eighth of what a reader has read, at
// most the depth) came later, for readers that stop early: with the
// readers_N bench at its default sizes (16 MiB chunks, 32 MiB copies,
// 1 MiB Fetches), whole chunks read ahead to the depth from a reader's
// third Fetch fetched 2.4-2.8 bytes per byte served for 8 readers of 4
// MiB and 3.4 for one of 32 MiB; the window fetches 1.06-1.07 and 1.09,
// and 0.98-1.02 for 8 readers of 512 MiB (0.72-0.84 before, readers
// sharing whole chunks). Its cost is a reader's start: one reader of
// 256 MiB from a cold cache makes 2.3 times the GETs.
//
// # Disk format
//
// One file per chunk, <dir>/<first 2 hex of the name>/<name>, where the
// name is the SHA-256, in hex, of "<object key>\x00<chunk index>\x00<chunk
// size>" (files written with another chunk size are never read as this
// size's chunks):
//
//	magic   4 bytes   "TDC3"
//	from    uint32    big-endian, chunk-relative offset of data[0]
//	length  uint32    big-endian, bytes of data
//	crc     uint32    big-endian, CRC-32C of from (4 bytes), the name hash
//	                  (32 bytes) and data
//	name    32 bytes  the SHA-256 the file is named by
//	data    length bytes
//
// Files are written to a temporary name (<name>.<random>.tmp), fsynced
// and renamed into place, unless the chunk's file holds more bytes (a
// part, loaded while the cache is crowded or by a random read, never
// replaces a whole chunk or a larger part, whichever load's write ends
// last); a reader takes a file only when it holds the bytes asked for. A file whose magic, length, name or CRC does not
// match (a torn write, a bad disk, a file moved or copied over another)
// is deleted and the chunk loaded again. On start the directory's
// <2 hex>/<name> files are scanned and enter the LRU by modification
// time; leftover temporary files of that pattern are removed; nothing else
// in the directory is touched.
package cache
