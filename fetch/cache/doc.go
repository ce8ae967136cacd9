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
// One file per chunk, <dir>/<first 2 hex of the key hash>/<key hash>, where
// the key hash is the SHA-256 of "<object key>\x00<chunk index>" in hex:
//
//	magic   4 bytes  "TDC2"
//	from    uint32   big-endian, chunk-relative offset of data[0]
//	length  uint32   big-endian, bytes of data
//	crc     uint32   big-endian, CRC-32C of from (4 bytes) then data
//	data    length bytes
//
// Files are written to a temporary name, fsynced and renamed into place. A
// file whose magic, length or CRC does not match (a torn write, a bad disk)
// is deleted and the chunk loaded again. On start the directory is scanned
// and its files enter the LRU by modification time; temporary files are
// removed.
package cache
