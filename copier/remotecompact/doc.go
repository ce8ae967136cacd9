// Package remotecompact merges runs of remote copies of a compacted
// topic's partition. A compacted topic's copies each hold the cleaned
// contents of one local segment, but a key updated in a later segment
// keeps its older versions in the earlier copies for as long as they
// live: the remote tier would grow with dead versions. So, once a pass
// has applied retention to a partition of a topic whose cleanup.policy
// contains compact, the copier calls Compact, which merges one run of
// adjacent copies (Plan, pure, says which) into one copy, re-compacted by
// Kafka's cleaner rules (buildMerged), committed with the copy protocol,
// and then deletes the copies it replaces:
//
//  1. read each copy's objects by key, checked against its manifest
//     (rsm.DownloadCopy), and rewrite them in a folder under the
//     partition's staging folder;
//  2. COPY_SEGMENT_STARTED for a new segment id covering the run's whole
//     range [first start offset, last end offset] (crash point
//     compact.started);
//  3. upload its objects, the manifest last, naming the merged copies
//     (compactionOf) (compact.uploaded);
//  4. COPY_SEGMENT_FINISHED (compact.finished): the row is remotelog.Newer
//     than every copy it merges (finished later) and covers each one's
//     range, so remotelog.Supersede, and with it every reader, sees the
//     merged copy from this one write on, and the merged copies no more;
//  5. delete each merged copy with DELETE_SEGMENT_STARTED/FINISHED
//     (compact.merged-deleted after the first), its proof: superseded by
//     the new copy, FINISHED, covering its range.
//
// A crash before 4 leaves the old copies readable and a STARTED row,
// which the next pass's deleter.CleanupUnfinished deletes with its
// objects; a crash after 4 leaves the merged copy readable, and the next
// pass's remote retention deletes the superseded copies on the same
// proof. Only the partitions this tierd owns are merged (the copier's
// pass runs only for them), the ownership is renewed before the work
// starts and before the commit (Partition.Renew), and with a Kafka
// cluster the copy is made under the leader epoch fence as any copy is.
//
// Compact also deletes, first, each lost merge: a finished merged copy
// marked damaged while every copy it merged is still whole
// (dropLostMerges).
//
// The Compactor works on a 5-method Store, a 2-method Bucket and the
// 5-method Deleter it owns (copier/deleter.Deleter satisfies it); the
// copier hands it its upload (the copy protocol's), its suspect-copy and
// sweep requests, and for each call the partition (Partition) and its
// settings (Pass). EachEntry, the checked reading of a .log, also serves
// the copier's record-level proofs for compacted topics.
package remotecompact
