// Package copier finds rolled segments in Kafka partition directories,
// copies them to remote storage and applies local and remote retention.
//
// # Every delete and its proof
//
// The remote tier is often the only copy of old data, so the copier
// deletes nothing on evidence that has another explanation. This is every
// path that deletes remote objects, remote metadata rows or local files,
// and the proof each requires. Remote deletes by retention, supersession
// and the whole-partition deletion run only in the tierd that owns the
// partition: the leader's (Kafka cluster configured, see WithCluster) or
// the lease holder's.
//
//	what goes                         path                      proof required
//	--------------------------------  ------------------------  ------------------------------------------------
//	remote: a copy past retention.ms  remoteRetention           its max timestamp (or, when missing or more than
//	                                                            message.timestamp.after.max.ms ahead, its copy
//	                                                            time) is older than retention.ms
//	remote: a copy over               remoteRetention           local size + remote-only copies exceed
//	  retention.bytes                                           retention.bytes; oldest first
//	remote: a copy below the log      remoteRetention           the log start offset (moved durably first, by
//	  start offset                                              retention or from the broker's
//	                                                            log-start-offset-checkpoint: delete-records)
//	                                                            lies past its end offset
//	remote: a superseded copy         remoteRetention           a newer, undamaged finished copy covers its whole
//	                                                            offset range
//	remote: this tierd's failed or    copyOne, upload,          the attempt is this tierd's own (a row it wrote,
//	  fenced copy attempt             rsm.CopySegment           new segment id) and failed, timed out, or was
//	                                                            fenced by a newer leader epoch
//	remote: a dead copy               cleanupUnfinished         a row this tierd wrote is in COPY_SEGMENT_STARTED
//	                                                            or DELETE_SEGMENT_STARTED at the start of a pass
//	                                                            (passes do not overlap: no copy is in flight)
//	remote: unrecorded objects        maybeSweep                after a start or a failure, objects under the
//	                                                            partition whose segment id has a dead row, or no
//	                                                            row and no manifest (an interrupted upload);
//	                                                            copies with a manifest are kept
//	remote: a copy the previous       reconcile                 on a takeover, a finished row whose manifest the
//	  owner deleted                                             bucket no longer lists (deletes go manifest first)
//	remote: every copy of a           runDeletion               journaled with its proof, then a grace period
//	  partition's incarnation                                   (remote.log.delete.delay.ms) during which
//	                                                            "tierd partitions restore" cancels it, and then:
//	                                                            the Kafka cluster answers UNKNOWN_TOPIC_ID for the
//	                                                            topic id, when scheduled and again when due (a
//	                                                            cluster of another id proves nothing); or an
//	                                                            operator ordered it ("tierd topics delete") while
//	                                                            no live directory held that incarnation, and the
//	                                                            cluster, if configured, does not list it
//	remote rows: deleted copies'      rlmm.PurgeDeleted         DELETE_SEGMENT_FINISHED for deleted_row_retention
//	local: a rolled segment           localRetention            an undamaged finished copy of exactly this file
//	                                                            (offsets and size), or the segment lies wholly
//	                                                            below the log start offset; and local retention
//	                                                            breached; the new local log start offset is saved
//	                                                            before the rename to .deleted (never with
//	                                                            broker_owned)
//	local: .deleted files             removeDeleted             renamed by localRetention file_delete_delay ago
//	local: .tierd-staging             cleanStaging, copyOne     tierd's own hard links, at the start of a pass
//
// Never a proof, each with another explanation: a "<topic>-<p>.<uuid>-delete",
// "-future" or "-stray" directory (a topic deletion, but also a move to
// another log dir, a reassignment, a removed replica); a vanished
// partition directory; an unreadable, empty, truncated, malformed or
// changed partition.metadata; a local log that restarts lower; a topic
// missing from the cluster's listing (ACLs hide topics); an unreachable
// cluster, or one with another cluster id. Each of these holds the
// partition (errHeld: neither tiered nor trimmed, reported once and in
// tierd_copier_partitions_held{reason}) or is only logged, and waits.
package copier
