// Package fetch serves the remote tier's reads: over gRPC (Fetch and
// FetchStream by offset, ListOffsets, ListSegments), and in process through the Go read
// API of *Server (ReadRemote, RemoteOffsets, RemotePartitions,
// RemoteAbortedTxns, RemoteOffsetForTimestamp, RemoteMaxTimestamp,
// RemoteLeaderEpochs), which the gRPC methods call: one implementation.
//
// The gRPC server also serves the standard health service
// (grpc.health.v1, following the readiness given by WithReadiness) and
// server reflection, over TLS when WithTLS is given (health.go). A Fetch
// answer can exceed gRPC's default 4 MiB receive limit: Dial's client sets
// none; other clients must raise theirs to fetch.max.bytes plus the
// largest batch.
//
// # Read path
//
// Each read takes the partition's offsets and finished copies from one
// rlmm snapshot. ReadRemote (and so Fetch) finds the copy holding the
// offset, the scan start in its offset index (parsed indexes are cached
// within remote.log.index.file.cache.total.size.bytes; the time index is
// loaded only for timestamp lookups, the transaction index only for
// aborted transactions) and reads through the chunk cache (package
// cache): the bytes from the index position to the next index entry's
// position + max_bytes are loaded at once with one ranged GET, and the
// gRPC answer is views of the cached chunks, one per chunk, sent without
// a copy (recordsCodec, fetchReply) and pinned until gRPC has written
// them (then the chunks' buffers may go back to package cache's pool);
// ReadRemote's answer is a copy, as its callers keep it. FetchStream
// sends the batches as their bytes arrive (stream.go); the client copies
// records once from the transport into their buffer (clientcodec.go,
// clientstream.go). A read that starts where an earlier one ended is
// sequential (prefetch.go) and is read ahead for (readahead.go): by at
// most an eighth of the bytes its chain of reads has taken, and at most
// remote.fetch.prefetch.max.bytes, so that a reader that stops leaves
// little loaded and unread; a load the read makes takes that window
// along, and once less than half of it is held, prefetches load the rest
// (parts of chunks, grown in place), into the following copies too, with
// their offset indexes, at most remote.fetch.prefetch.gets of that
// reader's at once, all readers' within one shared budget
// (remote.fetch.prefetch.budget.bytes; package cache's admission control
// skips what does not fit). Loads run apart from requests, at
// most remote.fetch.max.inflight.gets at once; a read waits for its first
// batch at most remote.fetch.max.wait.ms, then returns ErrStillLoading
// (UNAVAILABLE over gRPC) while the load goes on.
//
// WriteLogRange (logrange.go) reads a byte range of any copy's .log,
// given its size and a LogSource for its GETs, through the same chunk
// cache and read-ahead (its sequential readers are ranges that go on
// where, or a little before where, an earlier range of the copy ended;
// lograngetrack.go): the RSM endpoint's reads of the broker's own copies,
// which are not in tierd's metadata (package rsmapi).
//
// # Errors
//
// The Go API returns wrapped error classes (errors.go): ErrInvalidArgument,
// ErrNotTiered, *RangeError, ErrPastEnd (WriteLogRange), ErrStillLoading, ErrDataLoss (a finished
// copy's object missing, a corrupt copy, offsets no copy covers; the cause
// stays in the chain), ctx's errors; anything else is an object store or
// disk failure. A read that finds an object missing starts over with a new
// snapshot (the copy may have gone to retention meanwhile) up to three
// times before it is data loss. toStatus, at the gRPC edge, is the only
// place these become gRPC codes.
//
// # Transactions
//
// An aborted transaction's .txnindex entry is in the segment holding its
// abort marker, which may come after the records a read returns. As
// Kafka's fetch path does, RemoteAbortedTxns reads the transaction index of
// the copy holding the first offset and of the copies after it until an
// entry's last stable offset reaches the end of the range. Copies flagged
// with no transaction index are skipped without a GET.
package fetch
