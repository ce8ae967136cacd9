package copier

import (
	"fmt"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier/topics"
)

// RemoteCompaction configures remote compaction (package remotecompact): the
// merging of adjacent remote copies of a compacted topic's partition into
// one re-compacted copy. The three settings carry the names of Kafka's
// topic configs they stand for; a topic's own value, set in the Kafka
// cluster (cluster_topic_configs on), overrides each.
type RemoteCompaction struct {
	// Enable turns remote compaction on for the topics whose
	// cleanup.policy contains compact. Default true.
	Enable bool `yaml:"enable"`
	// SegmentBytes is the most bytes, summed over the .log objects of the
	// copies a merge reads, that one merge takes in (Kafka's segment.bytes,
	// which bounds a group of segments its log cleaner rewrites into one,
	// by their sizes before cleaning: LogCleaner.groupSegmentsBySize), so a
	// merged copy is never larger than a segment. From 14 to 2147483647
	// bytes. Default 1073741824 (1 GiB, Kafka's default).
	SegmentBytes int64 `yaml:"segment.bytes"`
	// MinCleanableDirtyRatio is Kafka's min.cleanable.dirty.ratio applied
	// to a run of copies: a run is merged only when the bytes of its copies
	// that no remote compaction wrote (copies of local segments, never
	// re-compacted against their neighbours) are at least this share of the
	// run's bytes. From 0 to 1. Default 0.5 (Kafka's default).
	MinCleanableDirtyRatio float64 `yaml:"min.cleanable.dirty.ratio"`
	// DeleteRetentionMs is Kafka's delete.retention.ms, ms: a tombstone
	// (and a transaction marker a cleaning may drop) stays this long after
	// the first cleaning that kept it (which sets its batch's delete
	// horizon, KIP-534), and a later merge past the horizon drops it. 0 or
	// more. Default 86400000 (1 day, Kafka's default).
	DeleteRetentionMs int64 `yaml:"delete.retention.ms"`
}

// DefaultRemoteCompaction returns the defaults: on, Kafka's segment.bytes,
// min.cleanable.dirty.ratio and delete.retention.ms.
func DefaultRemoteCompaction() RemoteCompaction {
	d := topics.DefaultCompaction()
	return RemoteCompaction{Enable: true, SegmentBytes: d.SegmentBytes, MinCleanableDirtyRatio: d.DirtyRatio, DeleteRetentionMs: d.DeleteRetentionMs}
}

// validate reports every problem of the settings (none when off).
func (rc RemoteCompaction) validate() []error {
	if !rc.Enable {
		return nil
	}
	var errs []error
	for _, err := range rc.compaction().Validate() {
		errs = append(errs, fmt.Errorf("copier: remote_compaction: %w", err))
	}
	return errs
}

// compaction is the three settings every compacted topic defaults to.
func (rc RemoteCompaction) compaction() topics.Compaction {
	return topics.Compaction{SegmentBytes: rc.SegmentBytes, DirtyRatio: rc.MinCleanableDirtyRatio, DeleteRetentionMs: rc.DeleteRetentionMs}
}

// clusterConfigs returns the topic configs last read from the cluster
// (nil without a cluster, or with cluster_topic_configs off).
func (c *Copier) clusterConfigs(topic string) map[string]cluster.ConfigValue {
	if c.cl == nil || !c.cfg.ClusterTopicConfigs {
		return nil
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.configs[topic]
}
