package seglog

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Config holds the topic-level settings a segment log honours. Names and
// defaults are Kafka's (TopicConfig / LogConfig); sizes are bytes, times ms.
type Config struct {
	// SegmentBytes is segment.bytes: the active segment is rolled before a
	// batch would take it past this size. Default 1073741824 (1 GiB);
	// minimum 1048576 (Kafka 4.0's floor); maximum 2147483647.
	SegmentBytes int64 `yaml:"segment.bytes"`
	// SegmentMs is segment.ms: a non-empty active segment is rolled when an
	// appended batch's max timestamp is more than this past the segment's
	// first batch timestamp (or, without timestamps, the segment's creation
	// time). Default 604800000 (7 days); minimum 1.
	SegmentMs int64 `yaml:"segment.ms"`
	// IndexIntervalBytes is index.interval.bytes: an offset and time index
	// entry is added for a batch once more than this many bytes have been
	// appended since the last entry. Default 4096; minimum 0.
	IndexIntervalBytes int32 `yaml:"index.interval.bytes"`
	// SegmentIndexBytes is segment.index.bytes: the preallocated size of
	// the active segment's .index and .timeindex; a full index rolls the
	// segment. Default 10485760 (10 MiB); minimum 12 (one time entry).
	SegmentIndexBytes int32 `yaml:"segment.index.bytes"`
	// MaxMessageBytes is max.message.bytes: the largest batch Append
	// accepts. Default 1048588.
	MaxMessageBytes int32 `yaml:"max.message.bytes"`
	// LeaderEpoch is stamped on every batch as partitionLeaderEpoch and
	// recorded in leader-epoch-checkpoint. Default 0. A log whose checkpoint
	// already has a later epoch continues in that epoch: a leader never
	// writes below the latest epoch.
	LeaderEpoch int32 `yaml:"leader.epoch"`

	// Log cleaner settings (see clean.go); names, defaults and limits are
	// Kafka's (TopicConfig, LogConfig, CleanerConfig).

	// CleanupPolicy is cleanup.policy: "delete", "compact" or
	// "compact,delete" (either order). Clean does nothing unless it
	// includes compact; seglog applies no retention of its own for delete
	// (tierd's copier does). Default "delete".
	CleanupPolicy string `yaml:"cleanup.policy"`
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: Clean rewrites
	// the log only when the dirty bytes are more than this share of the
	// cleanable bytes. Default 0.5; between 0 and 1.
	MinCleanableDirtyRatio float64 `yaml:"min.cleanable.dirty.ratio"`
	// MinCompactionLagMs is min.compaction.lag.ms: a segment whose max
	// timestamp is less than this old is not cleaned yet. Default 0;
	// minimum 0.
	MinCompactionLagMs int64 `yaml:"min.compaction.lag.ms"`
	// MaxCompactionLagMs is max.compaction.lag.ms: a dirty rolled segment
	// whose first batch timestamp is more than this old makes Clean run
	// whatever the dirty ratio. Default 9223372036854775807
	// (Long.MAX_VALUE); minimum 1; at least MinCompactionLagMs.
	MaxCompactionLagMs int64 `yaml:"max.compaction.lag.ms"`
	// DeleteRetentionMs is delete.retention.ms: how long a tombstone (and a
	// transaction marker Clean may remove) stays after the cleaning that
	// first kept it. Default 86400000 (1 day); minimum 0.
	DeleteRetentionMs int64 `yaml:"delete.retention.ms"`
}

// Compact reports whether cleanup.policy includes compact.
func (c Config) Compact() bool {
	_, compact, _ := parsePolicy(c.CleanupPolicy)
	return compact
}

// parsePolicy splits a cleanup.policy list; ok is false for an empty list
// or an unknown or repeated policy.
func parsePolicy(p string) (del, compact, ok bool) {
	if p == "" {
		return false, false, false
	}
	for _, part := range strings.Split(p, ",") {
		switch strings.TrimSpace(part) {
		case "delete":
			if del {
				return false, false, false
			}
			del = true
		case "compact":
			if compact {
				return false, false, false
			}
			compact = true
		default:
			return false, false, false
		}
	}
	return del, compact, true
}

// MinSegmentBytes is the smallest accepted segment.bytes.
const MinSegmentBytes = 1 << 20

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 60 * 60 * 1000,
		IndexIntervalBytes: 4096,
		SegmentIndexBytes:  10 << 20,
		MaxMessageBytes:    1048588,

		CleanupPolicy:          "delete",
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
		DeleteRetentionMs:      24 * 60 * 60 * 1000,
	}
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.SegmentBytes < MinSegmentBytes {
		errs = append(errs, fmt.Errorf("segment.bytes %d: must be at least %d", c.SegmentBytes, MinSegmentBytes))
	}
	if c.SegmentBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("segment.bytes %d: must be at most %d (index positions are int32)", c.SegmentBytes, math.MaxInt32))
	}
	if c.SegmentMs < 1 {
		errs = append(errs, fmt.Errorf("segment.ms %d: must be at least 1", c.SegmentMs))
	}
	if c.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("index.interval.bytes %d: must be at least 0", c.IndexIntervalBytes))
	}
	if c.SegmentIndexBytes < 12 {
		errs = append(errs, fmt.Errorf("segment.index.bytes %d: must be at least 12", c.SegmentIndexBytes))
	}
	if c.MaxMessageBytes < 61 {
		errs = append(errs, fmt.Errorf("max.message.bytes %d: must be at least 61 (one batch header)", c.MaxMessageBytes))
	}
	if c.LeaderEpoch < 0 {
		errs = append(errs, fmt.Errorf("leader.epoch %d: must not be negative", c.LeaderEpoch))
	}
	errs = append(errs, c.validateCleaner()...)
	if len(errs) > 0 {
		return fmt.Errorf("seglog: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

// validateCleaner checks the log cleaner settings (Kafka's LogConfig
// limits, and validateValues's min/max compaction lag rule).
func (c Config) validateCleaner() []error {
	var errs []error
	if _, _, ok := parsePolicy(c.CleanupPolicy); !ok {
		errs = append(errs, fmt.Errorf("cleanup.policy %q: must be delete, compact or compact,delete", c.CleanupPolicy))
	}
	if !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1) {
		errs = append(errs, fmt.Errorf("min.cleanable.dirty.ratio %v: must be between 0 and 1", c.MinCleanableDirtyRatio))
	}
	if c.MinCompactionLagMs < 0 {
		errs = append(errs, fmt.Errorf("min.compaction.lag.ms %d: must be at least 0", c.MinCompactionLagMs))
	}
	if c.MaxCompactionLagMs < 1 {
		errs = append(errs, fmt.Errorf("max.compaction.lag.ms %d: must be at least 1", c.MaxCompactionLagMs))
	}
	if c.MinCompactionLagMs > c.MaxCompactionLagMs {
		errs = append(errs, fmt.Errorf("min.compaction.lag.ms %d: must not be above max.compaction.lag.ms %d", c.MinCompactionLagMs, c.MaxCompactionLagMs))
	}
	if c.DeleteRetentionMs < 0 {
		errs = append(errs, fmt.Errorf("delete.retention.ms %d: must be at least 0", c.DeleteRetentionMs))
	}
	return errs
}
