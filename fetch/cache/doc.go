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
// # Disk format
//
// One file per chunk, <dir>/<first 2 hex of the key hash>/<key hash>, where
// the key hash is the SHA-256 of "<object key>\x00<chunk index>" in hex:
//
//	magic   4 bytes  "TDC1"
//	length  uint32   big-endian, bytes of data
//	crc     uint32   big-endian, CRC-32C of data
//	data    length bytes
//
// Files are written to a temporary name, fsynced and renamed into place. A
// file whose magic, length or CRC does not match (a torn write, a bad disk)
// is deleted and the chunk loaded again. On start the directory is scanned
// and its files enter the LRU by modification time; temporary files are
// removed.
package cache
