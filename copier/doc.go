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
//	                                                            time) is older than retention.ms; never with
//	                                                            cleanup.policy=compact alone (compact,delete: yes)
//	remote: a copy over               remoteRetention           local size + remote-only copies, less this
//	  retention.bytes                                           copy, still hold retention.bytes; oldest first;
//	                                                            never with cleanup.policy=compact alone
//	remote: a copy below the log      remoteRetention           the log start offset (moved durably first, by
//	  start offset                                              retention or from the broker's
//	                                                            log-start-offset-checkpoint: delete-records)
//	                                                            lies past its end offset
//	                                                            (these three, and local retention below, also
//	                                                            wait, on a new metadata dir, for
//	                                                            initial_retention_delay: see retentionwait.go)
//	remote: a superseded copy         remoteRetention           a newer, undamaged finished copy covers its whole
//	                                                            offset range (so a damaged copy goes once its
//	                                                            segment was copied again), its objects checked
//	                                                            present in the bucket right before
//	remote: a copy merged by remote   remotecompact:            the merged copy naming it (compactionOf) is
//	  compaction                        deleteMerged            FINISHED, undamaged, newer and covers its whole
//	                                                            range, so Supersede no longer keeps it, and its
//	                                                            objects are checked present right before (logged:
//	                                                            "superseded by copy <id> COPY_SEGMENT_FINISHED
//	                                                            covering [a, b]"); after a crash, remoteRetention
//	                                                            deletes it on the same proof
//	remote: a damaged merged copy     remotecompact:            finished and marked damaged (objects missing),
//	                                    dropLostMerges          and every copy it names (compactionOf) is
//	                                                            finished, undamaged and checked present right
//	                                                            before: it holds nothing they do not
//	remote: this tierd's failed or    copyOne, upload,          the attempt is this tierd's own (a row it wrote,
//	  fenced copy attempt             rsm.CopySegment           new segment id) and failed, timed out, or was
//	                                                            fenced by a newer leader epoch before its
//	                                                            manifest was written (after it, the objects are
//	                                                            left to the new leader and only the row goes)
//	remote: a dead copy               deleter.CleanupUnfinished a row this tierd wrote is in COPY_SEGMENT_STARTED
//	                                                            or DELETE_SEGMENT_STARTED at the start of a pass
//	                                                            (passes do not overlap: no copy is in flight)
//	remote: unrecorded objects        maybeSweep                after a start or a failure, objects under the
//	                                                            partition whose segment id has a dead row, or no
//	                                                            row and no manifest (an interrupted upload);
//	                                                            copies with a manifest are kept
//	remote: every copy of a           partitionDeletions        journaled with its proof, then a grace period
//	  partition's incarnation         (runDeletion)             (remote.log.delete.delay.ms) during which
//	                                                            "tierd partitions restore" cancels it, and then:
//	                                                            the Kafka cluster answers UNKNOWN_TOPIC_ID for the
//	                                                            topic id, when scheduled and again when due (a
//	                                                            cluster of another id proves nothing), unless an
//	                                                            operator restored it; or an operator ordered it
//	                                                            ("tierd topics delete") and, when ordered and
//	                                                            again when due, no live directory holds that
//	                                                            incarnation, no other tierd holds its lease, and
//	                                                            the cluster, if configured, confirms it gone; or
//	                                                            the topic's configuration turns tiering off and
//	                                                            orders it (KIP-950: remote.storage.enable=false
//	                                                            with remote.log.delete.on.disable=true, in
//	                                                            tierd.yaml or set in the cluster), when scheduled
//	                                                            and again when due (else it is cancelled), for
//	                                                            the incarnation the partition directory holds;
//	                                                            whatever the reason, scheduled by a pass and run
//	                                                            only while every log dir is available, ordered
//	                                                            only while none is missing (logdir.go); a copy
//	                                                            found in the bucket goes only when its manifest
//	                                                            reads and names the incarnation's topic id: one
//	                                                            whose manifest does not read (damaged, or under
//	                                                            a KEK not listed) is kept and the deletion stays
//	                                                            unfinished
//	remote rows: deleted copies'      rlmm.PurgeDeleted         DELETE_SEGMENT_FINISHED for deleted_row_retention
//	remote rows: a partition's        rlmm.ScheduleDeletion     moved, not dropped, into the scheduled deletion's
//	  incarnation                                               record (restore puts them back); the record goes
//	                                                            once every object is deleted (FinishDeletion)
//	remote row: a copy fenced after   deleter.Abandon,          this tierd's own COPY_SEGMENT_STARTED row; the
//	  its manifest                    rlmm.ForgetSegment        fence in the bucket is above the copy's epoch
//	metadata rows: a consumer         listener/groups           not the copier's, listed here as every delete is:
//	  group's record and offsets        (ExpireOffsets, Delete,   offsets.retention.minutes passed by KIP-211's
//	  (rlmm 'g' keys)                   DeleteOffsets)            rules (groups/doc.go); or a client with DELETE on
//	                                                            the group asked: DeleteGroups of an Empty group,
//	                                                            OffsetDelete of topics no member subscribes to
//	local: a rolled segment           localRetention            either an undamaged finished copy of exactly this
//	                                                            file (offsets and size), checked present in the
//	                                                            bucket right before, and local retention
//	                                                            breached; or, for a segment the log cleaner
//	                                                            rewrote after its copy (compacted.go: the topic
//	                                                            is compacted now or the copies were made
//	                                                            compacted, same topic id), undamaged finished
//	                                                            copies covering every offset of it, each checked
//	                                                            present right before (cleaning only removes
//	                                                            records: they hold all it holds; without topic
//	                                                            ids, the copies are read and must hold each of
//	                                                            its records at its offset), and local
//	                                                            retention breached; or the segment lies wholly
//	                                                            below the log start offset (moved by remote retention, or
//	                                                            the broker's checkpoint when within its high
//	                                                            watermark); never in a broker-owned log dir
//	                                                            (below); the new local log start offset is
//	                                                            saved before the rename to .deleted; the .log is
//	                                                            renamed only while it is the file listed (same
//	                                                            inode and size), else renamed back at once: a
//	                                                            cleaner's swap since
//	local: .deleted files             removeDeleted             renamed by localRetention file.delete.delay.ms
//	                                                            ago, in a log dir not broker-owned
//	local: .tierd-staging             cleanStaging, copyOne     tierd's own hard links, at the start of a pass
//	local: <log dir>/.lock            brokerExclusion.release   a .lock tierd created (or one a killed tierd left:
//	                                                            it holds tierd's mark), while tierd's own lock on it
//	                                                            is held, so no broker holds it, and only while the
//	                                                            path still names the file locked (same inode)
//	local: <log dir>/.lock.tierd-*    createMarked              tierd's own first name of a marked .lock, left by a
//	                                                            kill between its write and its link; no other
//	                                                            process writes this name
//	metadata dir: the write probe     rlmm (health.go)          the file it created and synced a moment before,
//	                                                            named after this process's pid
//	admin socket (fetch.admin.socket) fetch.ListenLocal         a Unix socket (not any other file) that refuses
//	                                                            connections (a stopped tierd's), in a directory
//	                                                            of mode 0700 owned by tierd's user; and its own
//	                                                            socket when it stops serving it
//	tierd api token's --token-file    runAPI                    the file it created (O_EXCL) a moment before, when
//	                                                            writing the token to it failed
//
// A log dir is broker-owned (logdir.go), and tierd renames and deletes
// no file of the broker's in it (its own .tierd-staging hard links aside):
//
//	broker_owned   the log dir holds                   broker-owned
//	-------------  ----------------------------------  ------------
//	any            .lock, locked by a process          yes
//	any            .lock whose lock cannot be checked  yes
//	true           anything                            yes
//	false          no locked .lock                     no
//	unset          meta.properties or .lock            yes
//	unset          neither                             no
//
// A running Kafka broker locks <log.dir>/.lock from start to shutdown
// (its LogManager's FileChannel.tryLock: on Linux an fcntl record lock,
// whole file); tierd asks with F_OFD_GETLK (else F_GETLK) at every pass,
// so a broker that starts after tierd is seen. While local retention
// renames files to .deleted or removes .deleted files, tierd holds a
// shared lock on .lock itself (F_OFD_SETLK, taken without waiting;
// creating the file if it is missing, and removing it again before the
// lock goes), so a broker that starts during a pass either holds its lock
// before tierd touches a file (tierd then touches none) or is refused it
// until tierd is done (Kafka's LogManager stops with "Failed to acquire
// lock on file .lock"; a restart a moment later starts it): a broker
// never runs while tierd renames. A .lock that tierd creates holds a line
// that marks it as tierd's from the moment it exists (written to
// .lock.tierd-<pid> first, then linked into place; Kafka's is empty, and
// Kafka never writes to it): one left by a tierd killed while it held it does not make the dir
// a Kafka log dir, and the next renames remove it (only while no process
// holds a lock on it; a broker that started on it since holds it, and
// meta.properties marks a log dir a broker has run on anyway). After a
// power loss (or when its write fails, on a full disk) the line may be
// gone: an empty .lock then counts as Kafka's, the side that deletes
// nothing. The line is written only once tierd's lock on the new file is
// granted (a broker that locked it first keeps it empty), and tierd's
// lock counts only while the path still names the file it locked (a
// stopping broker deletes its .lock after unlocking it). A .lock that is
// not a regular file (a FIFO, which is never waited on, a directory, a
// device) is one whose lock cannot be checked. A pass over a
// broker-owned log dir copies only; the broker's own retention trims the
// local log.
//
// A log dir that is missing, cannot be listed, is no longer the one
// tierd run locked at start (an unmounted disk's empty mount point: see
// WithLogDirCheck) or whose checkpoints cannot be read is a fault: tierd
// is not ready (LogDirsReady); every partition the metadata store knows
// and no readable log dir holds is held (log_dir_unavailable), never
// remote only; no whole-partition deletion is scheduled or run, and
// DeleteTopic refuses (ErrLogDirUnavailable), until it is back.
//
// Two types of their own hold this state for the pass and the delete
// paths. logDirs (logdir.go) probes the log dirs, keeps the last probe
// and the pass's faults, and says what must wait for them. auditor
// (audit.go) checks finished copies in the bucket: those readers
// reported (SuspectCopy), a few each CopyCheckIntervalMs taken in turn
// across the partitions a pass worked on (samplePartitions, sampleCopies),
// and each proof right before a delete (copyPresent for local retention,
// checkCopy for the delete protocol, compacted covers and remote
// compaction). It marks a copy with objects missing damaged, only while
// the store is known to be up, and clears a damaged copy found whole.
//
// Which local segments and remote copies retention may delete, and the
// proof of each (the copy that covers a segment, the limit a copy
// breaches, the copy that supersedes another), package retention decides
// from rows, segments, offsets, limits and the time alone (PlanLocal,
// PlanRemote, Superseded); localRetention and remoteRetention check those
// proofs in the bucket right before, and delete.
//
// Each remote path deletes a copy's objects by key (rsm.DeleteSegment:
// its row names the seven keys; nothing is listed per copy), then aborts
// the incomplete multipart uploads of the copies it deleted, with one
// listing of the partition's uploads (rsm.AbortUploads), and only those
// whose key names one of those copies' segment ids: the copy's own proof
// covers them. A copy that failed or was cut off (copyOne, remotecompact's failedMerge)
// and a dead copy (deleter.CleanupUnfinished) have theirs aborted instead by each
// of the copy's seven keys exactly (rsm.AbortUploadsOf), before the row
// reaches DELETE_SEGMENT_FINISHED: MinIO's listings of a prefix or of the
// bucket do not show an upload that a store outage cut off once MinIO
// restarted, while a listing of its exact key does. When the store does
// not answer, the row stays DELETE_SEGMENT_STARTED and every later pass
// tries again, after a restart too.
//
// Retention, superseded copies and the clean-up of dead copies run the
// delete protocol for up to 256 copies of a partition at once
// (package deleter): DELETE_SEGMENT_STARTED for all of them in one synced
// write before any object goes (for retention, after the log start offset
// moved past all of them, durably), then each copy's objects, then
// DELETE_SEGMENT_FINISHED, in one synced write, for those whose objects all
// went; a copy whose delete failed stays DELETE_SEGMENT_STARTED for the
// next pass. The proof of each copy is checked, and logged, as for one.
//
// # Remote compaction
//
// For a topic whose cleanup.policy contains compact, a pass that owns a
// partition merges, after retention, one run of adjacent remote copies
// into one copy re-compacted by Kafka's log cleaner rules (package
// internal/kafkalog/compact), so that the remote tier does not keep
// every dead version of a key. Package remotecompact holds it: the pure
// planner (Plan, with its table tests), the merge (buildMerged) and the
// workflow (Compactor, with its metrics), on its own narrow Store,
// Bucket and Deleter. The copier builds one Compactor in New
// (newCompactor: its store, bucket, delete protocol and copy upload) and
// calls it at the end of each partition's pass (remoteCompact, which
// hands it the partition and the topic's settings: RemoteCompaction, the
// topic's entry, the cluster's topic configs, as package topics
// resolves them):
//
//	read the run's copies by key, checked against their manifests
//	COPY_SEGMENT_STARTED   new segment id, range [first start, last end]   crash point compact.started
//	upload, manifest last  the manifest's compactionOf names the copies    compact.uploaded
//	COPY_SEGMENT_FINISHED  newer than each merged copy: readers switch     compact.finished
//	delete each merged copy (DELETE_SEGMENT_STARTED/FINISHED, with proof)  compact.merged-deleted
//
// A run holds only undamaged copies Supersede keeps that share no offset
// with another kept copy (so the merged copy supersedes exactly the copies
// it read), wholly below the first local offset, contiguous, of one topic id, at most segment.bytes
// of .log together, and is merged when its bytes that no merge wrote are
// at least min.cleanable.dirty.ratio of them. The key map covers the run:
// a record goes when a later record of the run has its key. Tombstones and
// transaction markers follow delete.retention.ms (the first merge sets the
// delete horizon, one past it drops them) only in a run that starts at
// the partition's first live copy; a later run keeps them, since an
// earlier copy may still hold an older value of their key. A crash before
// COPY_SEGMENT_FINISHED leaves the old copies readable and a STARTED row
// that deleter.CleanupUnfinished deletes; after it, the merged copy is read and
// remoteRetention deletes the superseded copies.
//
// A takeover (new lease holder or new leader) deletes nothing: a finished
// row whose manifest the bucket no longer lists is marked damaged
// (reconcile). Tools (demo, bench) delete only the keys they uploaded,
// under a run prefix of their own that was empty (rsm.RecordingBucket).
//
// A local segment of a compacted topic that differs from its copies (the
// broker's cleaner rewrote it) is never evidence against the copies: it
// marks nothing damaged and deletes nothing remote (compacted.go). Of
// one into which the cleaner merged copied segments, only the tail is
// copied (tailcopy.go): the batches after the last offset the copies
// holding its start cover, as a copy of [that offset + 1, its end] with
// indexes rebuilt, which supersedes none of them; a batch across that
// offset makes it wait, logged. When no copy holds its start, the whole
// segment is copied (superseding the copies within it) only while it
// still holds every tombstone and transaction marker those copies hold;
// else it waits, logged.
//
// Never a proof, each with another explanation: a "<topic>-<p>.<uuid>-delete",
// "-future" or "-stray" directory (a topic deletion, but also a move to
// another log dir, a reassignment, a removed replica); a vanished
// partition directory; an unreadable, empty, truncated, malformed or
// changed partition.metadata; a local log that restarts lower; a topic
// missing from the cluster's listing (ACLs hide topics); an unreachable
// cluster, or one with another cluster id; a log dir missing or
// unreadable. Each of these holds the
// partition (errHeld: neither tiered nor trimmed, reported once and in
// tierd_copier_partitions_held{reason}) or is only logged, and waits.
//
// # What it reports
//
// One reporter (reporter.go) holds what the copier reports, apart from
// the passes' work: the first reason each partition waits in a pass
// (owners, holds and deletions say it through wait), every partition's
// status as the last pass left it with the copies in flight (Status, the
// status page, tierd status), the progress log of a long copy, and the
// metrics named after Kafka's tiered-storage metrics (per partition,
// bounded by partlabels; the lag and size gauges are computed from Status
// when scraped). It reads the metadata store for the remote side of a
// status, and the gate's verdict, and writes nothing else. A partition's
// status after a pass is a pure function of what the pass left
// (partitionStatusOf in status.go). The counters of metrics.go
// (tierd_copier_passes_total, tierd_copier_segments_copied_total and the
// rest) stay with the jobs that count them.
package copier
