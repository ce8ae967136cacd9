package copier

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	passes, passErrors, partitionErrors prometheus.Counter
	copied, copiedBytes, copyFailures   prometheus.Counter
	localDeleted, remoteDeleted, gaps   prometheus.Counter
	indexesRebuilt, corrupt, futureTS   prometheus.Counter
	rebuilt, swept, trimmedTails        prometheus.Counter
	recreated, incarnation, mismatch    prometheus.Counter
	deletionsScheduled, deletionsRun    prometheus.Counter
	deletionsPending                    prometheus.Gauge
	held                                *prometheus.GaugeVec
	heldTotal                           *prometheus.CounterVec
	leaseRaces, instanceConflicts       prometheus.Counter
	fenced, copiesChecked, damaged      prometheus.Counter
	heartbeats, tailCopies              prometheus.Counter
	dirAvailable, dirBrokerOwned        *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	c := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Name: "tierd_copier_" + name, Help: help})
	}
	m := &metrics{
		passes:             c("passes_total", "Sync passes run."),
		passErrors:         c("pass_errors_total", "Sync passes that had at least one error."),
		partitionErrors:    c("partition_errors_total", "Partition syncs that failed."),
		copied:             c("segments_copied_total", "Segments copied to remote storage."),
		copiedBytes:        c("copied_bytes_total", "Bytes of .log copied to remote storage."),
		copyFailures:       c("copy_failures_total", "Segment copies that failed and were cleaned up."),
		localDeleted:       c("local_segments_deleted_total", "Local segments deleted by local retention."),
		remoteDeleted:      c("remote_segments_deleted_total", "Remote segment copies deleted."),
		gaps:               c("gaps_total", "Offset ranges deleted locally before they were copied."),
		indexesRebuilt:     c("indexes_rebuilt_total", "Segments uploaded with indexes rebuilt from the log because their own were unusable."),
		corrupt:            c("corrupt_segments_total", "Segments not copied because their log failed its checks."),
		futureTS:           c("future_timestamps_total", "Segments judged by file or copy time because their max timestamp is too far ahead."),
		rebuilt:            c("metadata_rebuilt_segments_total", "Segment rows restored from bucket manifests."),
		swept:              c("orphan_objects_deleted_total", "Bucket objects deleted because no live row points at them."),
		recreated:          c("topics_recreated_total", "Partitions whose topic was re-created (the cluster confirmed the old topic id gone): the old incarnation's copies were scheduled for deletion."),
		deletionsScheduled: c("partition_deletions_scheduled_total", "Whole-partition deletions of remote copies scheduled (journaled, with their proof)."),
		deletionsRun:       c("partition_deletions_total", "Whole-partition deletions of remote copies carried out after their grace period."),
		deletionsPending: f.NewGauge(prometheus.GaugeOpts{Name: "tierd_copier_partition_deletions_pending",
			Help: "Whole-partition deletions scheduled and not yet finished (restorable while within their grace period)."}),
		held: f.NewGaugeVec(prometheus.GaugeOpts{Name: "tierd_copier_partitions_held",
			Help: "Partitions neither tiered nor trimmed in the last pass because of local evidence tierd will not act on, by reason."}, []string{"reason"}),
		heldTotal: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_copier_partition_holds_total",
			Help: "Times a partition was first held for a reason (distinct evidence), by reason."}, []string{"reason"}),
		incarnation:   c("incarnation_mismatches_total", "Partitions left alone because their local log starts below the recorded local log start offset."),
		mismatch:      c("mismatched_segments_total", "Local segments whose offsets are tiered by a copy of different contents."),
		tailCopies:    c("tail_copies_total", "Copies of the tail of a compacted topic's segment the cleaner merged with copied segments: its batches after the last tiered offset."),
		trimmedTails:  c("trimmed_tails_total", "Segments copied without the zero bytes after their last batch (a preallocated .log)."),
		leaseRaces:    c("lease_races_lost_total", "Ownership lease writes whose condition failed: another tierd wrote the lease first, and the partition was left to it for the pass."),
		copiesChecked: c("copies_checked_total", "Finished copies checked for missing objects."),
		damaged:       c("damaged_copies_total", "Finished copies found with objects missing from the bucket (marked damaged; copied again while local)."),
		fenced:        c("fenced_copies_total", "Copies not committed because a newer leader epoch fenced the partition while they were made (and deleted)."),
		heartbeats:    c("lease_heartbeats_total", "Writes of this tierd's instance heartbeat, which keep all its partition ownership leases (one per third of ownership_lease)."),
		dirAvailable: f.NewGaugeVec(prometheus.GaugeOpts{Name: "tierd_copier_log_dir_available",
			Help: "1 while the log dir can be read (and is the one tierd started on), 0 while it is missing or unreadable: tierd is then not ready and deletes nothing of what it may hold."},
			[]string{"log_dir"}),
		dirBrokerOwned: f.NewGaugeVec(prometheus.GaugeOpts{Name: "tierd_copier_log_dir_broker_owned",
			Help: "1 when tierd renames and deletes no file in the log dir (broker_owned, a Kafka log dir, or a running broker's lock on its .lock), 0 when it applies local retention there."},
			[]string{"log_dir"}),
		instanceConflicts: c("lease_instance_conflicts_total",
			"Partitions refused because another tierd with the same broker_id and another instance id holds their ownership lease."),
	}
	for _, r := range heldReasons {
		m.held.WithLabelValues(r)
		m.heldTotal.WithLabelValues(r)
	}
	return m
}
