// Package remoteread is the remote read engine: it reads the tiered log
// (finished copies in the object store, as the metadata store lists them)
// for every reader tierd has, in process. Its Go read API is *Engine's
// ReadRemote, RemoteOffsets, RemotePartitions, RemoteAbortedTxns,
// RemoteOffsetForTimestamp, RemoteMaxTimestamp and RemoteLeaderEpochs
// (the Kafka listener's path, through logview), and WriteLogRange (the
// RSM endpoint's, package rsmapi). The gRPC edge, package grpcapi, answers
// RemoteFetch over the same engine (ReadViews, TieredOffsets,
// RemoteSegments); this package imports no gRPC.
//
// # Read path
//
// Each read takes the partition's offsets and finished copies from one
// metadata snapshot (metasnap.go; the copies in offset order in a chunked
// list, seglist.go). ReadRemote finds the copy holding the offset, the
// scan start in its offset index (parsed indexes are cached within
// remote.log.index.file.cache.total.size.bytes, indexcache.go; the time
// index is loaded only for timestamp lookups, timestamps.go, the
// transaction index only for aborted transactions, txn.go) and reads
// through the chunk cache (package cache): the bytes from the index
// position to the next index entry's position + max_bytes are loaded at
// once with one ranged GET (reader.go). ReadViews answers with views of
// the cached chunks, held (Hold) until the caller lets go, which the gRPC
// edge sends without a copy; ReadRemote's answer is a copy, as its callers
// keep it. A read that starts where an earlier one ended is sequential
// (prefetch.go) and is read ahead for (readahead.go): by at most an eighth
// of the bytes its chain of reads has taken, and at most
// remote.fetch.prefetch.max.bytes, so that a reader that stops leaves
// little loaded and unread; a load the read makes takes that window
// along, and once less than half of it is held, prefetches load the rest
// (parts of chunks, grown in place), into the following copies too, with
// their offset indexes, at most remote.fetch.prefetch.gets of that
// reader's at once, all readers' within one shared budget
// (remote.fetch.prefetch.budget.bytes; package cache's admission control
// skips what does not fit). Loads run apart from requests, at most
// remote.fetch.max.inflight.gets at once; a read waits for its first
// batch at most remote.fetch.max.wait.ms, then returns ErrStillLoading
// while the load goes on. The .log loads share one byte rate
// (remote.log.manager.fetch.max.bytes.per.second, package quota).
//
// WriteLogRange (logrange.go) reads a byte range of any copy's .log,
// given its size and a LogSource for its GETs, through the same chunk
// cache and read-ahead (its sequential readers are ranges that go on
// where, or a little before where, an earlier range of the copy ended;
// lograngetrack.go): the RSM endpoint's reads of the broker's own copies,
// which are not in tierd's metadata.
//
// # Errors
//
// The engine returns wrapped error classes (errors.go): ErrInvalidArgument,
// ErrNotTiered, *RangeError, ErrPastEnd (WriteLogRange), ErrStillLoading,
// ErrDataLoss (a finished copy's object missing, a corrupt copy, offsets
// no copy covers; the cause stays in the chain; dataloss.go logs it once
// and tells WithMissingCopyHook), ErrStoreUnreachable (unreachable.go),
// ctx's errors; anything else is an object store or disk failure. A read
// that finds an object missing starts over with a new snapshot (the copy
// may have gone to retention meanwhile) up to three times before it is
// data loss. The gRPC edge alone maps these classes to gRPC codes.
//
// # Transactions
//
// An aborted transaction's .txnindex entry is in the segment holding its
// abort marker, which may come after the records a read returns. As
// Kafka's fetch path does, RemoteAbortedTxns reads the transaction index of
// the copy holding the first offset and of the copies after it until an
// entry's last stable offset reaches the end of the range. Copies flagged
// with no transaction index are skipped without a GET.
//
// # Metrics and settings
//
// The engine registers its metrics (tierd_fetch_*, tierd_remote_fetch_*,
// tierd_cache_*) on WithRegisterer's registry; Reconfigure applies the
// dynamic settings (DynamicKeys) of a reloaded tierd.yaml.
package remoteread
