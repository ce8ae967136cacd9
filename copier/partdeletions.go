package copier

import (
	"context"
	"log/slog"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// partitionDeletions is the whole-partition deletion workflow: every
// remote copy of a partition's incarnation, journaled with its proof
// (schedule), waited out for remote.log.delete.delay.ms, its proof
// checked again when due, then deleted (runDeletions). A pass runs its
// two steps, checkGoneTopics and runDeletions; a partition whose topic's
// configuration turns tiering off schedules one (deleteOnDisable) or
// cancels it when tiering is back (reenabled); operators order one
// (deleteTopic) or cancel it (restore) between passes. It is built from
// narrow dependencies, not the copier: see deletions().
type partitionDeletions struct {
	cfg   *Config // the copier's current config: changed only between passes
	now   func() time.Time
	log   *slog.Logger
	m     *metrics
	say   partitionReporter
	store deletionStore
	rs    deletionBucket
	// objects deletes the copies' objects and aborts their incomplete
	// uploads (the delete protocol's, deletes()), counting each request
	// and each copy deleted.
	objects deletionObjects
	cl      Cluster      // nil: no Kafka cluster configured
	views   clusterViews // the copier's views of the cluster and its answers
	dirs    logDirHealth
	// tiered reports whether tierd tiers a partition at all (not an
	// internal topic's).
	tiered func(tp remotelog.TopicPartition) bool
	// settings resolves a topic's retention and tiering policy as a pass
	// applies it (tierd.yaml under the cluster's topic configs).
	settings func(topic string) topicSettings
	// needSweep has the partition swept on its next pass.
	needSweep func(tp remotelog.TopicPartition)
	// noteWait records, for this pass's status, that tp's due deletion
	// waits and why (detail).
	noteWait func(tp remotelog.TopicPartition, detail string)
}

// deletionStore is the metadata store as the deletions use it
// (rlmm.Store): the recorded partitions and their offsets, and the
// deletion journal.
type deletionStore interface {
	Partitions() ([]remotelog.TopicPartition, error)
	Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error)
	ScheduleDeletion(tp remotelog.TopicPartition, topicID string, reason remotelog.DeletionReason, proof string, dueMs int64) (remotelog.PartitionDeletion, error)
	CancelDeletion(tp remotelog.TopicPartition, topicID, detail string, keep bool) (remotelog.PartitionDeletion, error)
	StartDeletion(tp remotelog.TopicPartition, topicID, detail string) (remotelog.PartitionDeletion, error)
	FinishDeletion(tp remotelog.TopicPartition, topicID, detail string) error
	Deletions(tp *remotelog.TopicPartition) ([]remotelog.PartitionDeletion, error)
}

// deletionBucket is the bucket as the deletions read it (rsm.Manager): a
// partition's manifests (the incarnation's copies the store never learned
// of) and its ownership lease (an operator's order needs no other tierd
// to hold it).
type deletionBucket interface {
	Manifests(ctx context.Context, tp remotelog.TopicPartition) ([]*rsm.Manifest, error)
	ReadLease(ctx context.Context, tp remotelog.TopicPartition) (rsm.Lease, bool, error)
}

// deletionObjects is how the deletions delete a copy's objects, as a
// partition's (deleter.Deleter.DeleteObjects), and abort the incomplete
// uploads of the copies ids of tp deleted (deleter.Deleter.AbortUploads).
type deletionObjects interface {
	DeleteObjects(ctx context.Context, tp remotelog.TopicPartition, r remotelog.SegmentMetadata) error
	AbortUploads(ctx context.Context, tp remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) error
}

// logDirHealth is the log dirs' last probe (logdir.go): whether a step
// must wait for them (logging why, once), and which are unavailable.
type logDirHealth interface {
	waitForDirs(what string) bool
	unavailableDirs() string
}

// deletions returns the whole-partition deletion workflow over the
// copier's store, bucket and cluster as they are now.
func (c *Copier) deletions() *partitionDeletions {
	return &partitionDeletions{cfg: &c.cfg, now: c.now, log: c.log, m: c.m, say: c, store: c.store, rs: c.rs, cl: c.cl, views: c, dirs: c.dirs,
		objects: c.deletes(), tiered: c.tiered, settings: c.settings, needSweep: c.needSweep,
		noteWait: c.rep.noteDeletionWait}
}
