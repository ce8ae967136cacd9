package remotelog

// TierState is where tiering of one partition stands, as the copier's
// last pass found it (see PartitionStatus).
type TierState string

// Tier states. The set is closed: metrics label by it.
const (
	// TierCopying: a copy of one of the partition's segments is in flight.
	TierCopying TierState = "copying"
	// TierUpToDate: every rolled segment that may be copied has a finished
	// copy; only the active segment (or nothing) is left locally.
	TierUpToDate TierState = "up_to_date"
	// TierWaiting: rolled segments are not copied, for the reason given.
	TierWaiting TierState = "waiting"
	// TierRemoteOnly: the partition has remote metadata and no live
	// directory in the log dirs; its copies stay as they are.
	TierRemoteOnly TierState = "remote_only"
)

// TierStates lists every TierState, in the order tools print them.
var TierStates = []TierState{TierCopying, TierUpToDate, TierWaiting, TierRemoteOnly}

// WaitReason says why a partition waits (TierWaiting). The set is closed:
// metrics label by it.
type WaitReason string

// Wait reasons.
const (
	// WaitNotInCheckpoint: the log dir has a replication-offset-checkpoint
	// and the partition is not in it, so none of its offsets counts as
	// committed (high watermark 0).
	WaitNotInCheckpoint WaitReason = "not_in_checkpoint"
	// WaitHighWatermark: the broker's high watermark does not pass the last
	// offset of the next segment to copy.
	WaitHighWatermark WaitReason = "high_watermark"
	// WaitNotCleaned: the topic's cleanup.policy includes compact and the
	// broker's log cleaner has not passed the next segment to copy (its
	// last offset is not below the partition's entry in the log dir's
	// cleaner-offset-checkpoint, or there is no entry), or it is
	// replacing the partition's segments right now.
	WaitNotCleaned WaitReason = "not_cleaned"
	// WaitCorruptSegment: the next segment to copy fails its checks (the
	// detail gives the byte position); it is kept locally and not copied.
	WaitCorruptSegment WaitReason = "corrupt_segment"
	// WaitLeaseHeld: another tierd holds the partition's ownership lease.
	WaitLeaseHeld WaitReason = "lease_held"
	// WaitNotLeader: the Kafka cluster names another broker the
	// partition's leader (or does not know the topic).
	WaitNotLeader WaitReason = "not_leader"
	// WaitClusterUnreachable: no fresh leadership from the Kafka cluster.
	WaitClusterUnreachable WaitReason = "cluster_unreachable"
	// WaitStoreUnreachable: the object store did not answer (tierd's
	// probe says it is down, or a copy's request did not reach it).
	WaitStoreUnreachable WaitReason = "store_unreachable"
	// WaitMetadataUnwritable: the metadata dir takes no writes (full,
	// read-only or failing); no pass runs until it does.
	WaitMetadataUnwritable WaitReason = "metadata_unwritable"
	// WaitTieringDisabled: tiering is off for the topic.
	WaitTieringDisabled WaitReason = "tiering_disabled"
	// WaitHeld: local evidence tierd will not act on holds the partition
	// (PartitionStatus.Held names it).
	WaitHeld WaitReason = "held"
	// WaitCopyFailed: the last copy attempt failed for another reason
	// (the detail has the error); the next pass retries.
	WaitCopyFailed WaitReason = "copy_failed"
	// WaitNextPass: the pass stopped before the partition's copies were
	// made (shutdown, or leadership changed mid-pass); the next pass goes
	// on.
	WaitNextPass WaitReason = "next_pass"
	// WaitNotRunning: no tierd is running to copy (a status computed by a
	// tool over a stopped tierd's files and metadata).
	WaitNotRunning WaitReason = "not_running"
)

// WaitReasons lists every WaitReason.
var WaitReasons = []WaitReason{WaitNotInCheckpoint, WaitHighWatermark, WaitNotCleaned, WaitCorruptSegment, WaitLeaseHeld, WaitNotLeader,
	WaitClusterUnreachable, WaitStoreUnreachable, WaitMetadataUnwritable, WaitTieringDisabled, WaitHeld, WaitCopyFailed, WaitNextPass, WaitNotRunning}

// CopyProgress is a copy in flight.
type CopyProgress struct {
	// BaseOffset and EndOffset are the segment's first and last offsets.
	BaseOffset int64 `json:"baseOffset"`
	EndOffset  int64 `json:"endOffset"`
	// Bytes is the size of the .log being copied; SentBytes how much of it
	// was read for upload so far.
	Bytes     int64 `json:"bytes"`
	SentBytes int64 `json:"sentBytes"`
	// StartedMs is when the copy started (ms since the Unix epoch).
	StartedMs int64 `json:"startedMs"`
}

// PartitionStatus is what tiering of one partition is doing and why, as
// the copier's last pass over it decided: a value for tools, the status
// page and metrics. Offsets are Kafka offsets, sizes bytes, times ms
// since the Unix epoch; -1 means unknown or none.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Dir is the partition directory ("" for TierRemoteOnly).
	Dir   string    `json:"dir,omitempty"`
	State TierState `json:"state"`
	// Reason is set when State is TierWaiting.
	Reason WaitReason `json:"reason,omitempty"`
	// Held is the hold reason (copier's partition_metadata_invalid,
	// topic_id_changed, ...) when Reason is WaitHeld.
	Held string `json:"held,omitempty"`
	// Detail says, in a sentence, what the pass decided and why.
	Detail string `json:"detail"`
	// Error is the last pass's error for the partition, "" when none
	// (retention errors show here while copying is up to date).
	Error string `json:"error,omitempty"`
	// Copying is the copy in flight (TierCopying).
	Copying *CopyProgress `json:"copying,omitempty"`

	// PendingSegments and PendingBytes are the rolled segments at or
	// above the log start offset with no finished copy: Kafka's
	// RemoteCopyLagSegments and RemoteCopyLagBytes.
	PendingSegments int   `json:"pendingSegments"`
	PendingBytes    int64 `json:"pendingBytes"`
	// LocalSegments and LocalBytes count the live local segments, the
	// active one included; LocalLogStartOffset is the first one's base
	// offset and ActiveBaseOffset the active segment's.
	LocalSegments       int   `json:"localSegments"`
	LocalBytes          int64 `json:"localBytes"`
	LocalLogStartOffset int64 `json:"localLogStartOffset"`
	ActiveBaseOffset    int64 `json:"activeBaseOffset"`
	// HighWatermark is from the log dir's replication-offset-checkpoint,
	// -1 without one.
	HighWatermark int64 `json:"highWatermark"`
	// LogStartOffset and HighestTieredOffset bound the remote offsets.
	LogStartOffset      int64 `json:"logStartOffset"`
	HighestTieredOffset int64 `json:"highestTieredOffset"`
	// RemoteSegments and RemoteBytes count the finished copies: Kafka's
	// RemoteLogSizeBytes is RemoteBytes. MetadataRows counts every
	// metadata row in any state (RemoteLogMetadataCount).
	RemoteSegments int   `json:"remoteSegments"`
	RemoteBytes    int64 `json:"remoteBytes"`
	MetadataRows   int   `json:"metadataRows"`
	// RemoteStoredBytes is what the finished copies' .log objects take in
	// the bucket: a chunked copy's StoredSizeInBytes (compressed, sealed),
	// a plain copy's SizeInBytes. ChunkedSegments counts the finished
	// copies in chunked form, EncryptedSegments those of them encrypted.
	RemoteStoredBytes int64 `json:"remoteStoredBytes"`
	ChunkedSegments   int   `json:"chunkedSegments"`
	EncryptedSegments int   `json:"encryptedSegments"`
	// DeleteLagSegments and DeleteLagBytes are the copies that should be
	// deleted and are not yet: rows in DELETE_SEGMENT_STARTED and finished
	// copies wholly below the log start offset (Kafka's
	// RemoteDeleteLagSegments, RemoteDeleteLagBytes).
	DeleteLagSegments int   `json:"deleteLagSegments"`
	DeleteLagBytes    int64 `json:"deleteLagBytes"`
	// DamagedCopies counts the finished copies a check marked damaged
	// (objects missing from the bucket, or differing from the manifest);
	// Damaged is the first one's base offset and reason, "" for none.
	DamagedCopies int    `json:"damagedCopies,omitempty"`
	Damaged       string `json:"damaged,omitempty"`
	// LastCopyMs is when the newest finished copy finished, -1 for none.
	LastCopyMs int64 `json:"lastCopyMs"`
	// UpdatedMs is when this status was computed.
	UpdatedMs int64 `json:"updatedMs"`
}

// TieringStatus is every partition's status and the copier's passes.
type TieringStatus struct {
	// Running is false for a status computed over a stopped tierd.
	Running bool `json:"running"`
	// Passes counts the passes run since start; LastPassMs is when the
	// last one ended and LastSuccessMs when the last successful one
	// ended (-1: none yet): a pass that ran (not skipped for the object
	// store or the metadata dir) with every log dir read, no partition
	// failing (a partition waiting for held, lease_held, not_leader,
	// high_watermark, not_in_checkpoint, tiering_disabled or
	// corrupt_segment is not a failure) and no failed check or deletion.
	Passes        int64 `json:"passes"`
	LastPassMs    int64 `json:"lastPassMs"`
	LastSuccessMs int64 `json:"lastSuccessMs"`
	// SkippedTopics are the Kafka internal topics seen in the log dirs
	// and never tiered.
	SkippedTopics []string `json:"skippedTopics,omitempty"`
	// Partitions are sorted by topic, then partition.
	Partitions []PartitionStatus `json:"partitions"`
}

// Counts returns how many partitions are in each state, and how many of
// the waiting ones wait for each reason.
func (s TieringStatus) Counts() (map[TierState]int, map[WaitReason]int) {
	states, reasons := map[TierState]int{}, map[WaitReason]int{}
	for _, p := range s.Partitions {
		states[p.State]++
		if p.State == TierWaiting {
			reasons[p.Reason]++
		}
	}
	return states, reasons
}
