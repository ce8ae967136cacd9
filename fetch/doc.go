// Package fetch serves remote reads over gRPC: Fetch by offset, ListOffsets
// by timestamp, ListSegments.
//
// # Read path
//
// Each RPC reads the partition's offsets and finished copies from one
// rlmm snapshot. A Fetch finds the copy holding the offset, the scan start
// in its offset index (parsed indexes are cached within
// remote.log.index.file.cache.total.size.bytes; the time index is loaded
// only for timestamp lookups) and reads through the chunk cache (package
// cache): the bytes from the index position to the next index entry's
// position + max_bytes are loaded at once with one ranged GET, and the
// answer is a slice of the cached chunk (a copy only when it spans two
// chunks), sent without a marshal copy (recordsCodec). A fetch that starts
// where an earlier one ended is sequential: whole chunks up to
// remote.fetch.prefetch.max.bytes ahead are loaded, into the following
// copies too, with their offset indexes. Loads run apart from requests, at
// most remote.fetch.max.inflight.gets at once; a fetch waits for its first
// batch at most remote.fetch.max.wait.ms, then answers UNAVAILABLE while
// the load goes on.
package fetch
