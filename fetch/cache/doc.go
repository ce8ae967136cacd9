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
// A chunk first read in its middle is loaded from that byte to the chunk's
// end (a suffix), so that a cold random read costs about one GET of its
// own bytes; a later read of the chunk's earlier bytes loads it whole. A
// load fills its buffer as the body arrives and a reader returns as soon
// as its bytes are in. Loads run on their own, not under the request that
// started them, at most MaxInflightGets at once (prefetch takes only a free
// slot, never waits for one).
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
// and renamed into place. A file whose magic, length, name or CRC does not
// match (a torn write, a bad disk, a file moved or copied over another)
// is deleted and the chunk loaded again. On start the directory's
// <2 hex>/<name> files are scanned and enter the LRU by modification
// time; leftover temporary files of that pattern are removed; nothing else
// in the directory is touched.
package cache
