// Package locallog is a read-only view of one Kafka partition directory,
// "<topic>-<partition>", that a broker, tierd's own segment log (package
// seglog) or nobody writes, while tierd's copier may delete its oldest
// segments or rename them to ".deleted" at any moment (local retention).
// It serves what the Kafka listener needs from local disk: whole batches
// as stored, the partition's local offsets, aborted transactions, offsets
// by timestamp and the leader epochs.
//
// locallog only reads: it never writes, truncates, renames or deletes a
// file, takes no lock file, and does not recover a log the way seglog
// does. A torn or corrupt tail is not cut; it ends what is served.
//
// # What it reads
//
//   - The directory listing: live "<base>.log" files per internal/kafkalog
//     naming; ".deleted", ".cleaned", ".swap", ".tmp", "*.broken" and other
//     names are not segments. A ".log.swap" marks a log cleaner swap in
//     progress (see below). The oldest live segment's base offset is the
//     local log start offset; the last segment is the active one.
//   - Each .log through an open file handle kept for the segment's life in
//     the listing; an open handle of a deleted or renamed file stays
//     readable on Linux, so a read that started finishes from it.
//   - The .index and .timeindex of rolled segments that locallog has not
//     scanned itself, only as starting points (see below); the .txnindex of
//     each segment (aborted transactions); leader-epoch-checkpoint;
//     partition.metadata (topic id).
//
// # Listing
//
// The directory is listed again only when its mtime changed, when the
// previous listing was taken within 100 ms of that mtime (file times come
// from a coarse clock, so a change in the same tick would go unseen), or
// when a read found a segment file gone. A listing whose .log names are
// those of the previous one, each still the file opened, keeps it as it
// is. A segment known from before keeps its state unless its .log is now
// another file (a log cleaner replaced it, or the directory was deleted
// and created again with the same segment names). The file handles of segments that left the listing are
// closed once no read uses them (Close closes the rest).
//
// # Scanning and the served end
//
// Each segment has a cursor that walks its entry headers (package batch)
// forward, once, and only as far as the high watermark: for a rolled
// segment up to its end (zero bytes reaching the end are preallocated
// space; anything else malformed is kept as the segment's corruption); for
// the active segment only the bytes appended since the last call, stopping
// without error at the first torn, zero or malformed entry (a write in
// progress, or a preallocated segment), which the next call looks at
// again. The scan checks the header rules no checksum covers
// (batch.Checker: increasing offsets, at or above the base offset). While
// walking it keeps a sparse index of its own (every 64 KiB: last offset,
// position, max timestamp of everything before), the segment's max
// timestamp, and per producer the effect of its transactional batches.
//
// Without Options.HighWatermark the active segment's entries are also
// CRC-checked as they are scanned, and the high watermark is the offset
// after the last whole, CRC-valid entry: a bad CRC ends the served log.
// With it (broker-owned directories), the served end is the broker's high
// watermark, lowered to the local end when the local log does not reach it
// (a torn or missing tail), raised to the local log start offset when
// below it, and equal to the local log start offset (nothing served) when
// the partition has none; a bad CRC below it is corruption that Read
// reports. The entry that stopped a scan at the high watermark is
// remembered, so a call with the same high watermark reads nothing.
//
// The last stable offset is the first offset of the oldest transaction
// still open below the high watermark (KIP-98): a transactional data batch
// of producer P opens one when none is open for P, a control batch of P
// (commit or abort marker) closes it. The first Offsets call therefore
// reads the batch headers of every local segment once (8 KiB at a time
// from each header on: all the bytes of a log of small batches, a fraction
// of one of large batches). Limits: a transaction opened before
// the local log start offset is not seen, or is seen as opened at its
// first batch still present (its earlier records were deleted locally;
// the remote tier's view must cover it), and a rolled segment's entries
// after a corruption are not seen.
//
// # Reading
//
// Read finds the segment with the largest base offset <= offset and the
// first entry whose last offset is >= offset: at the position where an
// earlier read ended when it ended at that offset, else by walking entry
// headers from the best known starting point: the cursor's own index, else
// (a rolled segment not yet scanned) the .index, whose preallocated zero
// entries end it (index.ParseOffsetIndex). The .index is never trusted for
// correctness: a file that does not parse is ignored, and an entry whose
// landing is not an entry starting at or below the wanted offset, or a walk
// from it that breaks the header rules or reaches a bad CRC, makes the walk
// start over from a trusted point (0 at worst). Then one allocation of at
// most maxBytes (the first entry's size when larger) and one pread read the
// served entries, which are parsed, checked against the header rules and
// CRC-checked in memory; a problem with the first is a kafkalog.ErrCorrupt
// naming the file and position, a problem with a later one ends the answer
// before it. An offset past a segment's last entry (a compacted gap) reads
// from the next segment, unless a log cleaner swap (".log.swap") is in
// progress between the two, in which case the directory is listed again and
// the read retried; after three attempts the answer is ErrSegmentGone. Only
// the part of the active segment that its cursor scanned is served.
//
// # Timestamps
//
// OffsetForTimestamp skips segments whose scan shows no timestamp reaching
// the target, starts within a segment where the own index (or, for a
// rolled segment not yet scanned, the .timeindex with the .index; without
// a .timeindex that parses, the segment is scanned once first) says every
// earlier record is older, and decodes the records (gzip, snappy,
// lz4, zstd through internal/codec; legacy wrappers too) of the first
// entry whose max timestamp reaches the target. MaxTimestamp takes, over
// the segments' scans, the first entry with the largest max timestamp and
// decodes it for the first record with that timestamp (KIP-734). Both count
// records by offset: a limit inside an entry counts its records below the
// limit (Read, by contrast, never serves that entry).
//
// A .timeindex can mislead a search only by claiming records older than
// they are: nothing cheap can check that, so a rolled segment's time index
// is trusted as Kafka trusts it, until locallog has scanned the segment.
//
// # Limits
//
//   - A segment truncated in place (a broker truncating its active segment
//     after a leader change) is rescanned from the start when its size
//     drops below the cursor; a truncation below the high watermark that
//     the file regrows past before the next call is not detected.
//   - A listing may be up to one directory mtime change stale on
//     filesystems whose timestamps are coarser than 100 ms.
//   - A directory with no .log file reports all offsets 0.
//   - The remembered stopping entry of a broker-owned active segment is not
//     checked again: a broker truncating that entry away (above its high
//     watermark) and the high watermark then passing the new entries at
//     that position is the truncation case above.
//   - Memory per segment: the own index (24 bytes per 64 KiB of log), the
//     transaction state of the producers that wrote transactional batches
//     in it, and the parsed .index/.timeindex while it is not scanned.
//
// Sources: Apache Kafka LocalLog.scala (segment files, swaps, collecting
// aborted transactions), LogSegment.java (reads, indexes, timestamps),
// UnifiedLog.scala (high watermark, last stable offset), KIP-98, KIP-734.
package locallog
