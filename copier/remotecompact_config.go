package copier

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier/remotecompact"
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
	return RemoteCompaction{Enable: true, SegmentBytes: 1 << 30, MinCleanableDirtyRatio: 0.5, DeleteRetentionMs: 86400000}
}

// Kafka's names of the topic configs remote compaction reads.
const (
	cfgSegmentBytes      = "segment.bytes"
	cfgMinCleanableRatio = "min.cleanable.dirty.ratio"
	cfgDeleteRetentionMs = "delete.retention.ms"
	minSegmentBytes      = 14 // Kafka's smallest segment.bytes (LegacyRecord.RECORD_OVERHEAD_V0)
)

// validate reports every problem of the settings (none when off).
func (rc RemoteCompaction) validate() []error {
	if !rc.Enable {
		return nil
	}
	var errs []error
	if rc.SegmentBytes < minSegmentBytes || rc.SegmentBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("copier: remote_compaction: segment.bytes %d is out of range (from %d to %d bytes)", rc.SegmentBytes, minSegmentBytes, math.MaxInt32))
	}
	if !(rc.MinCleanableDirtyRatio >= 0 && rc.MinCleanableDirtyRatio <= 1) {
		errs = append(errs, fmt.Errorf("copier: remote_compaction: min.cleanable.dirty.ratio %v is out of range (from 0 to 1)", rc.MinCleanableDirtyRatio))
	}
	if rc.DeleteRetentionMs < 0 {
		errs = append(errs, fmt.Errorf("copier: remote_compaction: delete.retention.ms %d must not be negative", rc.DeleteRetentionMs))
	}
	return errs
}

// compaction resolves a topic's remote compaction settings as the other
// topic settings are: copier.remote_compaction's values, then the topic's
// entry in copier.topics, then each value the cluster has set for the
// topic (not Kafka's built-in default), when it parses and is in range.
// from names each value's source by its topic config name.
func (c Config) compaction(topic string, configs map[string]cluster.ConfigValue) (s remotecompact.Settings, from map[string]string) {
	rc := c.RemoteCompaction
	s = remotecompact.Settings{SegmentBytes: rc.SegmentBytes, DirtyRatio: rc.MinCleanableDirtyRatio, DeleteRetentionMs: rc.DeleteRetentionMs}
	from = map[string]string{cfgSegmentBytes: "copier.remote_compaction." + cfgSegmentBytes,
		cfgMinCleanableRatio: "copier.remote_compaction." + cfgMinCleanableRatio, cfgDeleteRetentionMs: "copier.remote_compaction." + cfgDeleteRetentionMs}
	if tc, ok := c.Topics[topic]; ok {
		entry := "copier.topics." + topic
		if v := tc.SegmentBytes; v != nil && *v >= minSegmentBytes && *v <= math.MaxInt32 {
			s.SegmentBytes, from[cfgSegmentBytes] = *v, entry
		}
		if v := tc.MinCleanableDirtyRatio; v != nil && *v >= 0 && *v <= 1 {
			s.DirtyRatio, from[cfgMinCleanableRatio] = *v, entry
		}
		if v := tc.DeleteRetentionMs; v != nil && *v >= 0 {
			s.DeleteRetentionMs, from[cfgDeleteRetentionMs] = *v, entry
		}
	}
	if cv, ok := setInCluster(configs, cfgSegmentBytes); ok {
		if n, err := strconv.ParseInt(cv.Value, 10, 64); err == nil && n >= minSegmentBytes && n <= math.MaxInt32 {
			s.SegmentBytes, from[cfgSegmentBytes] = n, "cluster "+cv.Source
		}
	}
	if cv, ok := setInCluster(configs, cfgMinCleanableRatio); ok {
		if f, err := strconv.ParseFloat(cv.Value, 64); err == nil && f >= 0 && f <= 1 {
			s.DirtyRatio, from[cfgMinCleanableRatio] = f, "cluster "+cv.Source
		}
	}
	if cv, ok := setInCluster(configs, cfgDeleteRetentionMs); ok {
		if n, err := strconv.ParseInt(cv.Value, 10, 64); err == nil && n >= 0 {
			s.DeleteRetentionMs, from[cfgDeleteRetentionMs] = n, "cluster "+cv.Source
		}
	}
	return s, from
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
