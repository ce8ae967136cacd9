// Package rsm is tierd's RemoteStorageManager (KIP-405): it copies the files
// of one rolled segment to an object store, reads them back by byte range,
// and deletes them. It stores bytes and knows object keys; it does not keep
// segment state (that is package rlmm) and never imports rlmm.
//
// # Object layout
//
// All objects of one copy share a stem that names the partition, the
// segment's base offset and the copy's segment id:
//
//	<prefix>/<topic>-<partition>/<20-digit base offset>-<segment id>.<suffix>
//
//	.log                       the segment's record batches, unchanged; the
//	                           zero tail after the last batch of a segment
//	                           the broker preallocated is left out
//	.index, .timeindex         the offset and time index, real entries only
//	                           (zero padding of a preallocated file is cut)
//	.txnindex                  aborted transactions (only when the broker had one)
//	.snapshot                  producer state at the end offset + 1 (when present)
//	.leader-epoch-checkpoint   the leader epochs of the segment's range, in
//	                           Kafka's checkpoint text format; for a
//	                           broker-owned copy, the bytes the broker gave
//	                           (its epoch history up to the segment's end)
//	.manifest.json             written last: see below
//
// and one object per partition, "<prefix>/<topic>-<partition>/_owner.json",
// the ownership lease that lets several tierds share a bucket with one
// writer per partition:
//
//	{"brokerId": 1, "instanceId": "q3J0...", "renewedMs": 1700000001000,
//	 "generation": 7, "released": false, "reconcile": false,
//	 "heartbeat": "_instances/1-q3J0....json"}
//
// and one object per tierd instance, its heartbeat,
// "<prefix>/_instances/<brokerId>-<instanceId>.json", that keeps every
// lease naming it ("heartbeat", a key relative to the prefix) alive:
//
//	{"brokerId": 1, "instanceId": "q3J0...", "renewedMs": 1700000301000,
//	 "generation": 42, "released": false}
//
// Both are only ever written with a conditional write (ConditionalWriter):
// created when absent ("If-None-Match: *"), and renewed, taken over or
// released by replacing the version that was read ("If-Match: <etag>"),
// so of two tierds racing for a lease one wins. The protocol, with L the
// ownership lease (ms) and clocks agreeing to within L/3:
//   - A lease is held while it is not released and either it (renewedMs)
//     or the heartbeat it names was renewed within L and that heartbeat
//     is not released (Lease.Free). A missing heartbeat counts as never
//     renewed. Leases without "heartbeat" (older tierds) count by their
//     own renewedMs.
//   - A holder writes its heartbeat before any lease naming it, renews it
//     every L/3 (one write for all its partitions, not one per lease), and
//     works on a partition only while its last successful renewal is less
//     than L/3 old by its clock; a copy started then ends (copy_timeout <=
//     L/2) before anyone can see the heartbeat expire.
//   - When a renewal ends 2L/3 or more after the previous one, another
//     tierd may have seen the heartbeat expire and taken leases over: the
//     holder reads each lease again (a conditional replace of the version
//     read) before it uses it.
//   - Another tierd takes a lease that is not held by replacing the
//     version it read; releasing the heartbeat (on shutdown) frees every
//     lease naming it in one write.
//
// Released leases and heartbeats are kept, never deleted; a heartbeat
// names one instance id, so one is left per metadata dir that ever ran.
// Leases written before instance ids have only brokerId and renewedMs. A
// tierd of before heartbeats renews and judges leases one by one and
// must not share a prefix with one that writes heartbeats.
//
// The segment id (22 characters of URL-safe base64) is new for every copy
// attempt, so a retry never overwrites an earlier attempt's objects and an
// object can be deleted only through the row that names it.
//
// # Deleting, and what it costs
//
// A copy's row names all its keys, so DeleteSegment deletes them by key
// (seven deletes, the manifest first) and lists nothing: its cost does
// not grow with the bucket, the partition or the number of copies. Parts
// of an upload that never completed (a crash mid-upload, a failed abort,
// a retried request that started a second upload) are found only by
// listing; AbortUploads lists the partition's incomplete uploads once for
// every copy deleted together and aborts those whose key names one of
// their segment ids. That listing does not find every upload on MinIO:
// MinIO lists by prefix only the uploads of an exact key, and in a
// listing of the whole bucket only those its running process began, so
// an upload that a store outage cut off is invisible to it once MinIO
// has restarted. AbortUploadsOf lists and aborts the uploads of each of
// one copy's seven keys by that exact key (seven listings of one key,
// whatever the bucket's size), which finds them; tierd's copier uses it
// for a copy that failed or was cut off. SweepPartition lists one
// partition's objects once: objects no live row names can only be found
// by listing. On the filesystem bucket a listing reads only the
// directory the prefix names, so a partition's listing costs that
// partition's files.
//
// # Manifest
//
// The manifest makes the bucket self-describing: with it, the remote
// metadata can be rebuilt from the bucket alone. A segment copy counts only
// once its manifest exists; a delete removes the manifest first, so a
// half-deleted copy never looks complete. JSON, version 2:
//
//	{
//	  "formatVersion": 2,
//	  "topic": "orders", "topicId": "B3_HiNPgSQ6oxG9ZZ6ED5A", "partition": 0,
//	  "segmentId": "hJ2x...", "startOffset": 0, "endOffset": 205,
//	  "maxTimestampMs": 1700000000205, "sizeInBytes": 1044420,
//	  "leaderEpochs": [{"epoch": 0, "startOffset": 0}],
//	  "txnIndexPresent": false, "producerSnapshotPresent": true,
//	  "createdMs": 1700000001000, "brokerId": 0, "instanceId": "q3J0...",
//	  "objects": {".log": {"key": "...", "size": 1044420, "crc32c": "5f2a09c4"}, ...}
//	}
//
// copyLeaderEpoch (the partition's leader epoch, from the Kafka cluster,
// under which the copy was made) is present only when tierd works with a
// cluster. A partition may also hold "_leader_epoch.json", the
// leader-epoch fence ({"leaderEpoch": 7, "brokerId": 2, ...}) a new
// leader's tierd raises before it acts: a copy made under a lower epoch
// is never committed.
// instanceId (the copying tierd's instance id) is absent from manifests
// written before instance ids. Readers reject an unknown formatVersion.
//
// Every object's entry records its size in bytes and a checksum of its
// bytes, which DownloadCopy, VerifyCopy and "tierd verify" check. In
// version 2 the checksum is "crc32c": the
// CRC-32C (Castagnoli polynomial, as in Kafka's record batches and S3's
// and GCS's object checksums) of the object's bytes, as 8 lowercase hex
// digits, most significant first ("5f2a09c4" is 0x5f2a09c4). Version 1
// manifests, written by earlier tierds and still read and verified, have
// "sha256" instead: the SHA-256 of the object's bytes, 64 lowercase hex
// digits; a version 1 manifest is otherwise the same. A manifest whose
// object lacks its version's checksum, or holds a malformed one, is
// refused (ErrBadManifest), so no copy passes a check it was never
// given; a checksum of the other kind, if an entry has one as well, is
// checked too. A tierd from before version 2 refuses version 2 manifests
// as of an unknown version.
//
// Why not a cryptographic digest: the manifest lives in the same bucket
// as the objects it describes, so whoever can rewrite an object can
// rewrite its manifest too, and no digest stored there protects against
// them (that is the bucket's access control's job). The checksum's job
// is to detect accidental damage, corruption and truncation, for which
// a 32-bit CRC with the size beside it suffices. It is computed in the
// read pass that feeds the upload, and CRC-32C runs on the CPU's CRC
// instructions at several GB/s, where SHA-256 cost about a quarter of a
// copy's CPU (the upload requests' own SigV4 payload hash is separate
// and stays; docs/bench.md, "Where each target stands").
//
// An optional "localSizeInBytes" (bytes; absent in
// older manifests) is written when the .log object is shorter than the
// local file it was copied from because a zero tail was left out: it is
// that file's size, and "sizeInBytes" is the object's.
//
// An optional "compacted": true (absent in older manifests and in copies
// of topics that are not compacted; absent reads as false, and the format
// version did not change for it, since a reader that does not know the field loses
// nothing by ignoring it) says the copy was made from a segment of a
// topic whose cleanup.policy includes compact, after the broker's log
// cleaner had passed it (below the partition's entry in the log dir's
// cleaner-offset-checkpoint). Its .log may miss offsets (the cleaner's
// gaps) and holds at least the latest record of every key in its range
// as of the copy; the broker may clean the local segment again later,
// so the local file's size need not match "sizeInBytes" (see the
// copier's "Tiering compacted topics").
//
// An optional "brokerOwned": true (absent reads as false; the format
// version did not change for it) marks a copy a Kafka broker made
// through tierd's RSM endpoint (package rsmapi) under its own key prefix
// (rsm.prefix, "_kafka-rsm" by default), where the segment id is the
// broker's RemoteLogSegmentId. Such a copy is owned by the broker's
// remote log metadata (__remote_log_metadata): the broker decides when
// it is finished and when it is deleted, and tierd's copier, retention,
// sweeps and remote compaction never read, adopt or delete it; its
// .leader-epoch-checkpoint object holds the bytes the broker gave.
//
// An optional "compactionOf" (absent on copies of local segments) lists, oldest first,
// the segment ids of the copies a remote compaction merged into this one:
// the copy covers their whole offset range with their records re-compacted
// (older versions of a key gone, offsets unchanged), and replaces them; a
// bucket holding both (a crash before their deletion) is read by the
// newer createdMs.
//
// # Decorators
//
// A Bucket can be wrapped: Count counts its calls; a RecordingBucket
// confines a tool's writes to one prefix and records its uploads; a Watch
// (NewWatch) probes the bucket and, through the bucket its Wrap returns,
// is told of every failed request, so that tierd's readiness follows the
// store.
package rsm
