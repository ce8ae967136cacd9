package remotecompact

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// ErrCompaction marks the failures of one merge (and wraps every error
// Compact returns).
var ErrCompaction = errors.New("copier: remote compaction")

// Store is what remote compaction needs of the metadata store
// (rlmm.Store): a partition's rows and offsets, and the two writes that
// commit a merged copy.
type Store interface {
	Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	FinishedSegments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error)
	AddSegment(meta remotelog.SegmentMetadata) error
	UpdateStates(tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, to remotelog.SegmentState) ([]remotelog.SegmentMetadata, error)
}

// Bucket is what remote compaction reads of remote storage (rsm.Manager):
// a copy's objects, checked against its manifest, and the partition's
// fence.
type Bucket interface {
	DownloadCopy(ctx context.Context, meta remotelog.SegmentMetadata, dir string) (*rsm.DownloadedCopy, error)
	CheckFence(ctx context.Context, tp remotelog.TopicPartition, topicID string, leaderEpoch int32) error
}

// Deleter is the remote-delete protocol remote compaction deletes
// through (copier/deleter.Deleter): the proof checked in the bucket right
// before, one copy deleted with DELETE_SEGMENT_STARTED/FINISHED, a failed
// copy discarded or (fenced after its manifest) abandoned, and the
// incomplete uploads of deleted copies aborted.
type Deleter interface {
	ProofPresent(ctx context.Context, by remotelog.SegmentMetadata) (bool, error)
	Delete(ctx context.Context, r remotelog.SegmentMetadata) error
	Discard(ctx context.Context, r remotelog.SegmentMetadata) error
	Abandon(meta remotelog.SegmentMetadata, err error) error
	AbortUploads(ctx context.Context, tp remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) error
}

// Deps are a Compactor's collaborators; every field is required.
type Deps struct {
	Store   Store
	Bucket  Bucket
	Deleter Deleter
	Log     *slog.Logger
	Now     func() time.Time
	// Upload runs the copy protocol's upload of a merged copy whose
	// STARTED row is written: its objects (throttled, under the copy
	// timeout, the manifest last, files.BeforeManifest called before it),
	// then the fence checked again, then every object checked stored
	// whole. An error wrapping FencedAfterManifest: the manifest was
	// written under an epoch the fence no longer allows. It returns the
	// finished row the manifest written stands for (its stored size and
	// whether it is encrypted go into the FINISHED row).
	Upload              func(ctx context.Context, meta remotelog.SegmentMetadata, files rsm.SegmentFiles) (remotelog.SegmentMetadata, error)
	FencedAfterManifest error
	// Suspect queues a copy for a check of its objects (a merge found one
	// missing or not matching its manifest); NeedSweep has the
	// partition's bucket objects checked against its rows on the next
	// pass (a failed upload may leave some).
	Suspect   func(meta remotelog.SegmentMetadata)
	NeedSweep func(tp remotelog.TopicPartition)
}

// Partition is one partition as the pass that compacts it sees it.
type Partition struct {
	TP          remotelog.TopicPartition
	TopicID     string // the log dir's topic id; "" when unknown
	LeaderEpoch int32  // the epoch this broker leads the partition in; -1 without a cluster
	// Staging is the partition's staging folder: a merge writes its files
	// in a folder under it, and removes both when done (Staging only when
	// empty).
	Staging string
	// LocalStart is the first offset still on local disk
	// (math.MaxInt64 when no segment is).
	LocalStart int64
	// Renew renews this tierd's ownership of the partition: false when
	// it is no longer its own.
	Renew func(ctx context.Context) (bool, error)
}

// Pass is the copier's configuration for one compaction.
type Pass struct {
	// Enabled: remote compaction is on and the topic's cleanup.policy
	// has compact; Settings are then the topic's.
	Enabled            bool
	Settings           Settings
	CopyTimeout        time.Duration // bounds reading and merging a run, and cleaning up a failed merged copy
	IndexIntervalBytes int64         // Kafka's index.interval.bytes for the merged copy's indexes
	BrokerID           int32         // recorded in the merged copy's row
	InstanceID         string        // recorded in the merged copy's row
	Form               string        // the merged copy's form (remotelog.SegmentMetadata.Form)
}

// Compactor runs remote compaction (see the package comment) and counts
// it in its metrics.
type Compactor struct {
	d Deps
	m *metrics
}

// New returns a compactor over d, its metrics registered with reg.
func New(d Deps, reg prometheus.Registerer) *Compactor {
	return &Compactor{d: d, m: newMetrics(reg)}
}

// metrics counts remote compaction.
type metrics struct {
	merges, merged, reclaimed, failures prometheus.Counter
	recordsDropped                      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	c := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Name: "tierd_copier_remote_compaction_" + name, Help: help})
	}
	return &metrics{
		merges:         c("merges_total", "Remote compactions committed: runs of adjacent copies of a compacted topic merged into one copy."),
		merged:         c("copies_merged_total", "Copies replaced by remote compactions."),
		reclaimed:      c("reclaimed_bytes_total", "Bytes of .log the remote tier holds less after remote compactions (the merged copies' bytes less the new copy's)."),
		failures:       c("failures_total", "Remote compactions that failed (their new copy, if any, was cleaned up; the old copies stay)."),
		recordsDropped: c("records_dropped_total", "Records remote compactions left out (older versions of a key, tombstones past their horizon, aborted transactions)."),
	}
}
