package groups

import (
	"errors"
	"fmt"
)

// Config holds the group coordinator's settings, with the names and
// defaults of Kafka's broker settings where one exists. Times are ms.
type Config struct {
	// MinSessionTimeoutMs is the shortest session.timeout.ms a member may
	// ask for, ms; a shorter one gets INVALID_SESSION_TIMEOUT. Default
	// 6000 (Kafka's group.min.session.timeout.ms).
	MinSessionTimeoutMs int32 `yaml:"group.min.session.timeout.ms"`
	// MaxSessionTimeoutMs is the longest session.timeout.ms a member may
	// ask for, ms; a longer one gets INVALID_SESSION_TIMEOUT. Default
	// 1800000 (Kafka's group.max.session.timeout.ms).
	MaxSessionTimeoutMs int32 `yaml:"group.max.session.timeout.ms"`
	// InitialRebalanceDelayMs is how long the first rebalance of an empty
	// group waits for more members, extended by each member that joins
	// meanwhile up to the rebalance timeout. Default 3000 (Kafka's
	// group.initial.rebalance.delay.ms); 0 completes it as soon as every
	// member has joined.
	InitialRebalanceDelayMs int32 `yaml:"group.initial.rebalance.delay.ms"`
	// MaxSize is the most members a group takes; a member past it gets
	// GROUP_MAX_SIZE_REACHED. Default 2147483647 (Kafka's group.max.size).
	MaxSize int `yaml:"group.max.size"`
	// MaxGroups is the most groups tierd keeps at once (tierd's own bound
	// on the memory clients can make it hold): a JoinGroup or OffsetCommit
	// that would create one more is answered COORDINATOR_NOT_AVAILABLE.
	// Default 10000.
	MaxGroups int `yaml:"group.max.count"`
	// OffsetsRetentionMinutes is how long committed offsets are kept after
	// the group became empty (and, in a group with members, after their
	// commit for a topic no member subscribes to), minutes (KIP-211).
	// Default 10080 (7 days, Kafka's offsets.retention.minutes).
	OffsetsRetentionMinutes int64 `yaml:"offsets.retention.minutes"`
	// OffsetsRetentionCheckIntervalMs is how often expired offsets are
	// looked for, ms. Default 600000 (Kafka's
	// offsets.retention.check.interval.ms).
	OffsetsRetentionCheckIntervalMs int64 `yaml:"offsets.retention.check.interval.ms"`
	// OffsetMetadataMaxBytes bounds a committed offset's metadata string,
	// bytes; a longer one gets OFFSET_METADATA_TOO_LARGE. Default 4096
	// (Kafka's offset.metadata.max.bytes).
	OffsetMetadataMaxBytes int `yaml:"offset.metadata.max.bytes"`
}

// DefaultConfig returns Kafka's defaults (and tierd's own for MaxGroups).
func DefaultConfig() Config {
	return Config{MinSessionTimeoutMs: 6000, MaxSessionTimeoutMs: 1800000, InitialRebalanceDelayMs: 3000, MaxSize: 2147483647,
		MaxGroups: 10000, OffsetsRetentionMinutes: 10080, OffsetsRetentionCheckIntervalMs: 600000, OffsetMetadataMaxBytes: 4096}
}

// Validate returns every setting out of range, joined.
func (c Config) Validate() error {
	var errs []error
	if c.MinSessionTimeoutMs <= 0 {
		errs = append(errs, fmt.Errorf("group.min.session.timeout.ms %d: must be > 0", c.MinSessionTimeoutMs))
	}
	if c.MaxSessionTimeoutMs < c.MinSessionTimeoutMs {
		errs = append(errs, fmt.Errorf("group.max.session.timeout.ms %d: must be >= group.min.session.timeout.ms %d", c.MaxSessionTimeoutMs, c.MinSessionTimeoutMs))
	}
	if c.InitialRebalanceDelayMs < 0 {
		errs = append(errs, fmt.Errorf("group.initial.rebalance.delay.ms %d: must be >= 0", c.InitialRebalanceDelayMs))
	}
	if c.MaxSize < 1 {
		errs = append(errs, fmt.Errorf("group.max.size %d: must be >= 1", c.MaxSize))
	}
	if c.MaxGroups < 1 {
		errs = append(errs, fmt.Errorf("group.max.count %d: must be >= 1", c.MaxGroups))
	}
	if c.OffsetsRetentionMinutes < 1 {
		errs = append(errs, fmt.Errorf("offsets.retention.minutes %d: must be >= 1", c.OffsetsRetentionMinutes))
	}
	if c.OffsetsRetentionCheckIntervalMs < 1 {
		errs = append(errs, fmt.Errorf("offsets.retention.check.interval.ms %d: must be >= 1", c.OffsetsRetentionCheckIntervalMs))
	}
	if c.OffsetMetadataMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("offset.metadata.max.bytes %d: must be >= 0", c.OffsetMetadataMaxBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	return nil
}
