// Package rsmapi is tierd's RSM endpoint: the HTTP/1.1 API that the
// broker-side plugin (kafka-rsm/, class
// io.tierd.kafka.TierdRemoteStorageManager, a Kafka
// RemoteStorageManager, KIP-405) calls for every copy, read and delete
// of a broker's tiered segments. The broker keeps its own remote log
// metadata (__remote_log_metadata, TopicBasedRemoteLogMetadataManager)
// and applies retention; tierd stores, checks, caches and serves the
// bytes, and keeps a catalogue of these copies for its tools, status and
// metrics. Copies made here are broker-owned: they live under their own
// key prefix, which tierd's copier, retention, sweeps and remote
// compaction never read or delete, and only a DELETE from the broker
// (or this package's clean-up of a copy attempt it stored itself and
// never reported stored) deletes them.
//
// # Wire, version 1
//
// HTTP/1.1, on rsm.listen (loopback by default), over TLS when tls.rsm
// is on. Every request, the health check included, carries
//
//	Authorization: Bearer <token>
//
// where <token> is the content of rsm.token_file (one line; surrounding
// whitespace is ignored). A request without it, or with another token,
// is answered 401 and does nothing; the token never appears in a log
// line or an answer. Request bodies are at most 1 MiB of JSON, except a
// copy by upload (below). Every answer that is not a success carries a
// JSON body
//
//	{"error": "rsm: copy of orders-0 segment 205: ...", "reason": "CORRUPT_SEGMENT"}
//
// whose reason is one of the names in the status table below. The
// plugin turns the status into Kafka's exception classes: 404 ->
// RemoteResourceNotFoundException; 429, 503, 504 (and a refused
// connection or a timeout) -> RetriableRemoteStorageException where the
// broker has it, else RemoteStorageException; anything else ->
// RemoteStorageException carrying "error".
//
//	status  reason               when
//	400     INVALID_ARGUMENT     malformed path, query, header or body; bad offsets or positions
//	401     UNAUTHENTICATED      no bearer token, or not the configured one
//	403     PATH_NOT_ALLOWED     a file path outside rsm.log_dirs, or not the segment's own file
//	404     NOT_FOUND            no such copy, or (for an index) no such object in the copy
//	409     TIERED_BY_SIDECAR    the topic is tiered by tierd's own copier (tiered both ways)
//	413     TOO_LARGE            a body over its limit
//	416     RANGE_NOT_SATISFIABLE a start position past the end of the .log
//	422     CORRUPT_SEGMENT      the segment's files fail tierd's checks (the error names file and byte)
//	429     TOO_MANY_COPIES      rsm.max_concurrent_copies copies are running
//	500     INTERNAL             anything else
//	503     UNAVAILABLE          the object store or the metadata store does not answer; shutting down
//	504     TIMEOUT              the copy did not end within rsm.copy_timeout
//
// # Addressing a copy
//
// A copy is named by what the broker's RemoteLogSegmentMetadata holds:
//
//	C = /v1/segments/{topic}/{partition}/{startOffset}/{segmentId}
//
// topic is the Kafka topic name (Kafka allows only [a-zA-Z0-9._-], so
// no escaping is needed), partition and startOffset decimal, and
// segmentId the copy's RemoteLogSegmentId.id as Kafka prints a Uuid (22
// characters of URL-safe base64 without padding). The broker makes a
// new segment id for every copy attempt. tierd derives every object key
// from these four values alone, so reads and deletes need no lookup:
//
//	<bucket.prefix>/<rsm.prefix>/<topic>-<partition>/<20-digit startOffset>-<segmentId>.<suffix>
//
// with the suffixes of package rsm's layout (.log, .index, .timeindex,
// .txnindex, .snapshot, .leader-epoch-checkpoint, .manifest.json).
// rsm.prefix defaults to "_kafka-rsm", which is not a partition
// directory name (Kafka's are <topic>-<partition>), so nothing that
// walks tierd's own partitions meets it.
//
// # Copy: PUT C
//
// Copies one rolled segment (copyLogSegmentData). By path (the plugin's
// default, for a sidecar that sees the broker's log dirs), the body is
// JSON with the rest of the metadata and the broker's file paths, after
// the plugin's tierd.path.map:
//
//	{
//	  "topicId": "B3_HiNPgSQ6oxG9ZZ6ED5A",
//	  "endOffset": 205,
//	  "maxTimestampMs": 1700000000205,
//	  "eventTimestampMs": 1700000001000,
//	  "brokerId": 1,
//	  "segmentSizeInBytes": 1044420,
//	  "segmentLeaderEpochs": [{"epoch": 0, "startOffset": 0}, {"epoch": 3, "startOffset": 120}],
//	  "logSegment": "/var/lib/kafka/data/orders-0/00000000000000000000.log",
//	  "offsetIndex": "/var/lib/kafka/data/orders-0/00000000000000000000.index",
//	  "timeIndex": "/var/lib/kafka/data/orders-0/00000000000000000000.timeindex",
//	  "transactionIndex": null,
//	  "producerSnapshot": "/var/lib/kafka/data/orders-0/00000000000000000206.snapshot",
//	  "leaderEpochCheckpoint": "MAoyCjAgMAozIDEyMAo="
//	}
//
// topicId, endOffset (inclusive), segmentSizeInBytes and logSegment,
// offsetIndex and timeIndex are required; transactionIndex and
// producerSnapshot are null or absent when the broker has no such file;
// leaderEpochCheckpoint is the base64 of the bytes of the broker's
// LogSegmentData.leaderEpochIndex buffer (the partition's whole epoch
// history in Kafka's checkpoint text), stored and returned byte for
// byte. Every path must lie, after cleaning, directly inside one of
// rsm.log_dirs (as configured, or with its symbolic links resolved), in
// the partition directory <topic>-<partition>, and be that segment's own
// file by name (<20-digit startOffset>.log/.index/.timeindex/.txnindex;
// the snapshot any <20-digit offset>.snapshot); neither the partition
// directory nor the file may be a symbolic link (tierd follows none below
// a log dir, whenever it was swapped in), nor the file a hard link whose
// owner is not the partition directory's: else 403, and nothing is read.
// A file that is missing, or is not a regular file (a FIFO, a directory),
// is 400.
//
// By upload (tierd.copy.mode=upload, for a sidecar that cannot see the
// broker's disk), the request has "Content-Type:
// application/vnd.tierd.segment" and the body is a 4-byte big-endian
// length n, n bytes of the same JSON with each path replaced by the
// file's size in bytes ("logSegmentBytes", "offsetIndexBytes",
// "timeIndexBytes", and "transactionIndexBytes" and
// "producerSnapshotBytes" when present), then the files' bytes one after
// another in that order, and nothing after them. tierd spools them into
// rsm.staging_dir and goes on as for a copy by path.
//
// tierd opens every file once and reads only through those handles, so
// a file the broker unlinks during the call still reads whole; it stores
// only bytes it checked (the indexes as checked; a .log whose uploaded
// bytes' CRC-32C is not that of the bytes checked, rewritten in place or
// read back otherwise from the disk, fails the copy, 500). It checks
// the .log as its own copier checks a segment (every batch's CRC, header
// and offset rules, records against their headers; a zero tail of a
// preallocated file is left out of the copy) and the indexes against the
// log (unusable indexes are rebuilt from the log by Kafka's rule), then
// uploads every object, the manifest last, checks them stored, and only
// then answers
//
//	200 {"customMetadata": "dAEB", "bytes": 1044420}
//
// customMetadata is the base64 of the bytes the plugin returns as the
// copy's RemoteLogSegmentMetadata.CustomMetadata: 0x74 ('t'), the layout
// version 1, and a flags byte (bit 0: a transaction index was stored,
// bit 1: a producer snapshot was stored); bytes is the size of the
// stored .log. A copy that fails anywhere deletes the objects it stored
// (and aborts its multipart uploads) before it answers. A copy of a
// segment id already stored whole (its manifest and every object at its
// size), of the same offsets and size, is answered as the first was,
// without storing anything again (the broker's contract: a retried copy
// does not fail; and a failure of the retry must not delete what the
// broker may have recorded finished); one whose stored copy is not whole
// is made again over it. Two requests for the same segment id run one
// after the other. A copy of a segment
// id that was deleted (by the broker, or as a failed attempt) is refused
// (400): it would outlive the delete; a new attempt has a new id. A
// client that goes away mid-copy (its timeout) ends the copy the same
// way as a failure.
//
// # Read the .log: GET C/log
//
//	Range: bytes=<start>-<end>     (both inclusive, as Kafka's positions are)
//	Range: bytes=<start>-          (to the end of the segment)
//
// answers 206 with the bytes [start, min(end, size-1)] and
// "Content-Range: bytes <start>-<last>/<size>", read through tierd's
// chunk cache; reads that continue where the previous read of the same
// copy ended count as one sequential reader and get prefetch. A start
// equal to the size answers 206 with an empty body and "Content-Range:
// bytes */<size>"; a start past the size 416. A request without Range
// answers the whole object (200). The plugin reads in bounded windows
// (tierd.fetch.window.bytes), so an abandoned stream holds no
// connection and at most one window.
//
// # Read an index: GET C/index/{type}
//
// type is one of Kafka's IndexType names: OFFSET, TIMESTAMP,
// TRANSACTION, PRODUCER_SNAPSHOT, LEADER_EPOCH. 200 with the whole
// object (OFFSET and TIMESTAMP hold exactly the real entries; LEADER_EPOCH
// is the bytes the copy was given); 404 when the copy has no such object
// (a segment without a transaction index). No index object is larger
// than 1 GiB: a copy whose transaction index or producer snapshot is
// larger is refused 413 (an offset or time index that large is unusable,
// and rebuilt from the log).
//
// The plugin reads every answer whole but bounded: a success at most the
// bytes it asked for (a read window), 1 GiB (an index) or 1 MiB (a copy's
// or a delete's answer), any other answer at most 1 MiB; past its bound
// (or a Content-Length that announces more) the call fails with a
// RemoteStorageException and the connection is closed.
//
// # Delete: DELETE C
//
// Deletes every object of the copy by key (the manifest first) and
// aborts the multipart uploads of those keys, each by its exact key.
// 204 whether or not anything was there: deleting is idempotent. A copy
// in flight for the same segment id is ended first.
//
// # Health: GET /v1/health
//
// 200 {"status": "ok"}, or 503 with the reason tierd is not ready.
//
// # Rules every request meets
//
// Fields of the JSON bodies that this version does not know are
// ignored, so that a newer plugin's additions do not break an older
// tierd; the ones it knows are checked (topicId a Uuid, endOffset at
// least the start offset, segmentSizeInBytes the .log's size in bytes,
// segmentLeaderEpochs not empty with epochs increasing). Numbers in the
// path are canonical decimals (no sign, no leading zero: one copy, one
// key), the segment id the canonical spelling of its 16 bytes. A read's
// Range is one range, bytes=<start>-[<end>]; suffix ranges and several
// ranges are 400. A read that fails after its first byte went out cuts
// the connection, so the client sees a body shorter than its
// Content-Length, never wrong bytes. A request body is read only while
// its request may run: a copy's until the copy ends (rsm.copy_timeout, a
// DELETE of the same id, shutdown); a body no handler reads (a request
// refused before its body is read, a route that takes none) gets 10 s to
// arrive, then the connection is closed after the answer. An answer 401
// closes its connection.
//
// # Tools' routes
//
// Beside wire version 1, for tierd's own tools (tierd status, tierd
// segments; the plugin does not call them), with the same token:
//
//	GET /v1/status                          the endpoint's Status (JSON)
//	GET /v1/segments/{topic}/{partition}    {"rows": [...]}: the catalogue's rows of the
//	                                        partition (remotelog.SegmentMetadata)
//
// # When the broker's view and tierd's differ
//
// The broker's own remote log metadata (__remote_log_metadata) is the
// truth about these copies: it decides which exist, and its retention
// deletes them (DELETE). tierd's catalogue (rows in the metadata store,
// in a key space tierd's copier never reads) records what tierd did, so
// that its tools, status page and metrics can show it. The two can
// differ; each case, and what tierd does:
//
//	case                                    what tierd does, and its proof for any delete
//	--------------------------------------  ---------------------------------------------------------
//	a copy tierd stored and answered 200    keeps it (row COPY_SEGMENT_FINISHED) until the broker
//	  whose answer the broker never         deletes it: tierd cannot know whether the broker recorded
//	  recorded (COPY_SEGMENT_FINISHED lost,  it; it shows it as stored, the broker's state unknown. A
//	  the plugin timed out, the broker       broker that failed the copy deletes that attempt (Kafka
//	  failed to publish)                     4.0+), or its retention does
//	a copy that failed before its answer    deletes the objects it stored (and aborts its multipart
//	  (a check, the store, the catalogue,    uploads) before answering; proof: the request never got
//	  the client gone, a DELETE, timeout)    success, so the broker never recorded it finished. The row
//	                                         goes DELETE_SEGMENT_STARTED, then _FINISHED
//	that clean-up failed too (the store     the row stays COPY_SEGMENT_STARTED or
//	  down)                                  DELETE_SEGMENT_STARTED; the janitor (every minute)
//	                                         deletes the objects once the store answers, under the
//	                                         id's lock, after reading the row again; proof: a
//	                                         COPY_SEGMENT_STARTED row with no copy in flight was
//	                                         written by a request that never got success. The
//	                                         broker's own DELETE of the attempt does the same
//	tierd killed during a copy              at start, every row still COPY_SEGMENT_STARTED is an
//	                                         attempt whose request never got success (tierd answers
//	                                         only once the row is COPY_SEGMENT_FINISHED), so the broker
//	                                         never recorded it finished: the janitor deletes its
//	                                         objects, logging that proof, and marks it
//	                                         DELETE_SEGMENT_FINISHED. Files a copy by upload staged are
//	                                         removed (rsm-upload-* in rsm.staging_dir)
//	tierd's metadata lost                   reads and deletes go on: every key follows from the
//	                                         request, a read's size from the copy's manifest. At start
//	                                         an empty catalogue is rebuilt from the manifests under the
//	                                         prefix (each a COPY_SEGMENT_FINISHED row: a manifest is
//	                                         written last). A copy whose manifest was stored but whose
//	                                         request failed just before the loss is then kept until the
//	                                         broker deletes it, never deleted on tierd's guess; objects of
//	                                         an attempt that has no manifest either go only with the
//	                                         broker's DELETE of that attempt (Kafka 4.0+ sends one
//	                                         after a failed copy)
//	the broker deletes a copy tierd has     DELETE deletes by key whatever tierd's rows say, and
//	  no row for, or deletes twice           answers 204; without a row it writes one,
//	                                         DELETE_SEGMENT_FINISHED, so that a copy of that id
//	                                         arriving after the delete is refused
//	the broker's metadata lost (a new       tierd keeps every copy it has a COPY_SEGMENT_FINISHED row
//	  cluster on old storage)                for: nothing tells it they are unused. Delete them with
//	                                         the broker's tools, or remove the prefix by hand
//
// Rows of deleted copies (DELETE_SEGMENT_FINISHED) are kept for
// DeletedRowsKept (1 hour), then forgotten.
package rsmapi
