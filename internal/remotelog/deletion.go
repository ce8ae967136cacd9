package remotelog

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DeletionReason says why every remote copy of one partition's incarnation
// is to be deleted. Only these reasons delete a whole partition's remote
// data; evidence on a broker's disk (a "-delete" directory, a vanished
// partition directory, a changed partition.metadata) never does.
type DeletionReason string

// Deletion reasons.
const (
	// ReasonTopicDeleted: the Kafka cluster answered that the topic id is
	// unknown (UNKNOWN_TOPIC_ID to a Metadata request by topic id).
	ReasonTopicDeleted DeletionReason = "topic-deleted"
	// ReasonOperator: an operator ordered it ("tierd topics delete").
	ReasonOperator DeletionReason = "operator"
	// ReasonTieringDisabled: the topic's configuration turns tiering off
	// and orders its remote data deleted (KIP-950:
	// remote.storage.enable=false with remote.log.delete.on.disable=true),
	// in tierd.yaml or in the Kafka cluster's topic configs.
	ReasonTieringDisabled DeletionReason = "tiering-disabled"
)

// DeletionState is where a scheduled partition deletion stands.
type DeletionState string

// Deletion states. A PENDING deletion can be cancelled (restored); once
// DELETING it runs to the end, and its record goes when every object is
// deleted.
const (
	DeletionPending  DeletionState = "PENDING"
	DeletionDeleting DeletionState = "DELETING"
	// DeletionCancelled only describes a record just cancelled (restored):
	// no stored record is in it.
	DeletionCancelled DeletionState = "CANCELLED"
)

// PartitionDeletion is a scheduled deletion of every remote copy of one
// incarnation (topic id) of a partition. Scheduling takes the partition's
// rows and offsets out of the live metadata into this record, so reads
// stop and a re-created topic of the same name tiers afresh; the objects
// are deleted only once DueMs has passed (remote.log.delete.delay.ms
// after ScheduledMs). Restoring before that puts the rows back.
type PartitionDeletion struct {
	TopicPartition TopicPartition `json:"topicPartition"`
	// TopicID is the incarnation's topic id, "" when its log had none.
	TopicID string         `json:"topicId,omitempty"`
	Reason  DeletionReason `json:"reason"`
	// Proof is the evidence, in words: which request to which cluster
	// answered what and when, or which operator command ran when.
	Proof       string        `json:"proof"`
	ScheduledMs int64         `json:"scheduledMs"`
	DueMs       int64         `json:"dueMs"`
	State       DeletionState `json:"state"`
	// Offsets are the partition's offsets when it was scheduled.
	Offsets PartitionOffsets `json:"offsets"`
	// Segments are the rows taken out of the live metadata: every copy
	// that was not yet DELETE_SEGMENT_FINISHED.
	Segments []SegmentMetadata `json:"segments"`
}

// Bytes returns the total SizeInBytes of the copies.
func (d PartitionDeletion) Bytes() int64 {
	var n int64
	for _, s := range d.Segments {
		n += s.SizeInBytes
	}
	return n
}

// Due reports whether the grace period has passed at nowMs.
func (d PartitionDeletion) Due(nowMs int64) bool { return nowMs >= d.DueMs }

// String describes the deletion in one line, for logs and refusals.
func (d PartitionDeletion) String() string {
	return fmt.Sprintf("%s (topic id %q): %d copies, %d bytes, %s, due %s: %s", d.TopicPartition, d.TopicID,
		len(d.Segments), d.Bytes(), d.Reason, DueText(d.DueMs), d.Proof)
}

// DueText renders a due time, ms since the epoch, as RFC 3339 UTC, or
// "never" for math.MaxInt64 (a grace period of Kafka's Long.MAX_VALUE).
func DueText(dueMs int64) string {
	if dueMs == math.MaxInt64 {
		return "never"
	}
	return time.UnixMilli(dueMs).UTC().Format(time.RFC3339)
}

// Journal events.
const (
	JournalScheduled = "scheduled" // a partition deletion was recorded, with its proof
	JournalCancelled = "cancelled" // restored within the grace period, or its proof no longer held
	JournalDeleting  = "deleting"  // the grace period passed: objects are being deleted
	JournalDeleted   = "deleted"   // every object of the incarnation is gone
)

// JournalEntry is one line of the deletion journal: what happened to a
// whole-partition deletion, why, and on what proof. Entries are written
// before the action they announce and never change.
type JournalEntry struct {
	Seq            int64          `json:"seq"`
	TimeMs         int64          `json:"timeMs"`
	Event          string         `json:"event"`
	TopicPartition TopicPartition `json:"topicPartition"`
	TopicID        string         `json:"topicId,omitempty"`
	Reason         DeletionReason `json:"reason"`
	Proof          string         `json:"proof"`
	DueMs          int64          `json:"dueMs"`
	// Segments and Bytes count the copies concerned.
	Segments int   `json:"segments"`
	Bytes    int64 `json:"bytes"`
	// Detail says more about this event (who cancelled, how many objects
	// were deleted).
	Detail string `json:"detail,omitempty"`
}

// Error classes: the packages that refuse an operator's request wrap one
// of these in their own sentinels, and the API edge (package grpcapi) maps
// the class to a status code without knowing the package.
var (
	// ErrNotFound: there is nothing of what was named.
	ErrNotFound = errors.New("not found")
	// ErrRefused: the request is understood and refused in this state.
	ErrRefused = errors.New("refused")
	// ErrCannotCheck: a fact needed to decide could not be learned now.
	ErrCannotCheck = errors.New("cannot check now")
	// ErrAmbiguous: the request must say more.
	ErrAmbiguous = errors.New("ambiguous request")
)
