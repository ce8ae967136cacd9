package topics

import (
	"fmt"
	"math"
	"strings"
)

// Retention holds a topic's retention settings with Kafka's topic-level
// names; nil means "not set here" (inherit). Times are ms, sizes bytes.
type Retention struct {
	// RetentionMs is retention.ms: remote and local data older than this
	// goes. Default 604800000 (7 days); -1 unlimited.
	RetentionMs *int64 `yaml:"retention.ms"`
	// RetentionBytes is retention.bytes: the whole log (local + remote,
	// each offset counted once) is kept within this size. Default -1
	// (unlimited).
	RetentionBytes *int64 `yaml:"retention.bytes"`
	// LocalRetentionMs and LocalRetentionBytes are local.retention.ms and
	// local.retention.bytes: the same for the local copy of tiered
	// segments. Default -2: "same as the total setting"; -1 unlimited. A
	// local value larger than the total one is clamped to the total (with
	// a warning), as Kafka does.
	LocalRetentionMs    *int64 `yaml:"local.retention.ms"`
	LocalRetentionBytes *int64 `yaml:"local.retention.bytes"`
}

// LogRetention is Retention with Kafka's broker-level names, the defaults
// of every topic. The fields are Retention's; convert with Retention(lr)
// or LogRetention(r).
type LogRetention struct {
	// RetentionMs is log.retention.ms, every topic's retention.ms unless
	// set for the topic. Default 604800000 (Kafka's
	// log.retention.hours=168); -1 unlimited.
	RetentionMs *int64 `yaml:"log.retention.ms"`
	// RetentionBytes is log.retention.bytes, every topic's
	// retention.bytes unless set for the topic. Default -1 (unlimited).
	RetentionBytes *int64 `yaml:"log.retention.bytes"`
	// LocalRetentionMs and LocalRetentionBytes are
	// log.local.retention.ms and log.local.retention.bytes, every topic's
	// local.retention.ms and local.retention.bytes unless set for the
	// topic. Default -2: "same as the total setting"; -1 unlimited.
	LocalRetentionMs    *int64 `yaml:"log.local.retention.ms"`
	LocalRetentionBytes *int64 `yaml:"log.local.retention.bytes"`
}

// TopicConfig is one topic's entry under copier.topics in tierd.yaml, with
// Kafka's topic-level names; nil means "not set here". A value the Kafka
// cluster has set for the topic overrides these (see Resolve and
// copier.Config.ClusterTopicConfigs).
type TopicConfig struct {
	// Retention: retention.ms, retention.bytes, local.retention.ms,
	// local.retention.bytes.
	Retention `yaml:",inline"`
	// RemoteStorageEnable is remote.storage.enable (KIP-405): tier the
	// topic. Default: the copier's remote.storage.enable (true).
	RemoteStorageEnable *bool `yaml:"remote.storage.enable"`
	// RemoteLogCopyDisable is remote.log.copy.disable (KIP-950): stop
	// copying; what is tiered stays readable and remote retention goes
	// on, and local.retention.* no longer applies: local data follows
	// retention.ms/bytes. Default false.
	RemoteLogCopyDisable *bool `yaml:"remote.log.copy.disable"`
	// RemoteLogDeleteOnDisable is remote.log.delete.on.disable (KIP-950):
	// with remote.storage.enable false, delete the topic's remote copies
	// (journaled, after remote.log.delete.delay.ms). Default false: a
	// topic whose tiering is off keeps its copies, readable, and is
	// otherwise left alone.
	RemoteLogDeleteOnDisable *bool `yaml:"remote.log.delete.on.disable"`
	// CleanupPolicy is cleanup.policy: "delete", "compact" or
	// "compact,delete" (either order). With compact, a rolled segment is
	// copied only once the broker's log cleaner has passed it, and
	// retention.ms/bytes delete no remote copy unless delete is listed too
	// (see CleanupPolicy). Default: the copier's log.cleanup.policy
	// ("delete").
	CleanupPolicy *string `yaml:"cleanup.policy"`
	// SegmentBytes, MinCleanableDirtyRatio and DeleteRetentionMs are
	// segment.bytes, min.cleanable.dirty.ratio and delete.retention.ms:
	// the topic's remote compaction (see RemoteCompaction, whose values
	// are the defaults), used when cleanup.policy has compact.
	SegmentBytes           *int64   `yaml:"segment.bytes"`
	MinCleanableDirtyRatio *float64 `yaml:"min.cleanable.dirty.ratio"`
	DeleteRetentionMs      *int64   `yaml:"delete.retention.ms"`
}

// DefaultRetention returns Kafka's defaults: retention.ms 604800000 (7
// days), retention.bytes -1 (unlimited), local.retention.ms and
// local.retention.bytes -2 (same as the total). Every field is set, each
// to its own variable.
func DefaultRetention() Retention {
	// One variable per field: a config decoder writes through these
	// pointers, so a shared one would set both local limits at once.
	ms, bytes, localMs, localBytes := int64(7*24*3600*1000), int64(-1), int64(-2), int64(-2)
	return Retention{RetentionMs: &ms, RetentionBytes: &bytes, LocalRetentionMs: &localMs, LocalRetentionBytes: &localBytes}
}

// Validate checks the values: retention.* at least -1, local.retention.*
// at least -2. Each error reads where + prefix + the key, as
// "copier: log.retention.ms -3: must be -1 or more" (prefix "log." for
// the broker-level names, "" for a topic's).
func (r Retention) Validate(where, prefix string) []error {
	var errs []error
	for _, f := range []struct {
		name string
		p    *int64
		min  int64
	}{{RetentionMsConfig, r.RetentionMs, -1}, {RetentionBytesConfig, r.RetentionBytes, -1},
		{LocalRetentionMsConfig, r.LocalRetentionMs, -2}, {LocalRetentionBytesConfig, r.LocalRetentionBytes, -2}} {
		if f.p != nil && *f.p < f.min {
			errs = append(errs, fmt.Errorf("%s%s%s %d: must be %d or more", where, prefix, f.name, *f.p, f.min))
		}
	}
	return errs
}

// Validate checks a topic's entry: its retention values, cleanup.policy
// (ParseCleanupPolicy) and remote compaction values (Compaction.Validate,
// for those set); the three booleans take any value, as Kafka's do. Each
// error starts with where ("copier: topics: orders: ").
func (tc TopicConfig) Validate(where string) []error {
	errs := tc.Retention.Validate(where, "")
	if tc.CleanupPolicy != nil {
		if _, err := ParseCleanupPolicy(*tc.CleanupPolicy); err != nil {
			errs = append(errs, fmt.Errorf("%scleanup.policy: %w", where, err))
		}
	}
	c := DefaultCompaction()
	if tc.SegmentBytes != nil {
		c.SegmentBytes = *tc.SegmentBytes
	}
	if tc.MinCleanableDirtyRatio != nil {
		c.DirtyRatio = *tc.MinCleanableDirtyRatio
	}
	if tc.DeleteRetentionMs != nil {
		c.DeleteRetentionMs = *tc.DeleteRetentionMs
	}
	for _, err := range c.Validate() {
		errs = append(errs, fmt.Errorf("%s%w", where, err))
	}
	return errs
}

// CleanupPolicy is a topic's cleanup.policy (Kafka's TopicConfig): a list
// of "delete" and "compact". Compact: the broker's log cleaner keeps the
// latest record of each key, and tierd copies only what it has cleaned.
// Delete: retention.ms and retention.bytes delete old data, local and
// remote. A topic with compact and without delete keeps its remote copies
// whatever retention.ms/bytes say, as Kafka deletes nothing of a
// compact-only log by retention; local.retention.* still removes local
// segments whose copies are finished, as for any tiered topic.
type CleanupPolicy struct {
	Compact, Delete bool
}

// ParseCleanupPolicy parses Kafka's list syntax: "delete", "compact",
// "compact,delete" or "delete,compact" (spaces around items allowed).
// Other items, and an empty list, return an error (an empty value from
// the cluster is ignored, as any value tierd does not understand).
func ParseCleanupPolicy(s string) (CleanupPolicy, error) {
	var p CleanupPolicy
	if strings.TrimSpace(s) == "" {
		return p, fmt.Errorf("empty: want delete, compact or compact,delete")
	}
	for _, item := range strings.Split(s, ",") {
		switch strings.TrimSpace(item) {
		case "compact":
			p.Compact = true
		case "delete":
			p.Delete = true
		default:
			return p, fmt.Errorf("%q: want delete, compact or compact,delete", s)
		}
	}
	return p, nil
}

// String is the policy as Kafka lists it ("compact,delete").
func (p CleanupPolicy) String() string {
	switch {
	case p.Compact && p.Delete:
		return "compact,delete"
	case p.Compact:
		return "compact"
	case p.Delete:
		return "delete"
	}
	return ""
}

// Compaction is a compacted topic's remote compaction settings, with the
// fields of remotecompact.Settings (convert with
// remotecompact.Settings(c)).
type Compaction struct {
	SegmentBytes      int64   // Kafka's segment.bytes: the most .log bytes one merge reads, bytes
	DirtyRatio        float64 // Kafka's min.cleanable.dirty.ratio, from 0 to 1
	DeleteRetentionMs int64   // Kafka's delete.retention.ms, ms
}

// MinSegmentBytes is Kafka's smallest segment.bytes, bytes
// (LegacyRecord.RECORD_OVERHEAD_V0); the largest is math.MaxInt32.
const MinSegmentBytes = 14

// DefaultCompaction returns Kafka's defaults: segment.bytes 1073741824
// (1 GiB), min.cleanable.dirty.ratio 0.5, delete.retention.ms 86400000
// (1 day).
func DefaultCompaction() Compaction {
	return Compaction{SegmentBytes: 1 << 30, DirtyRatio: 0.5, DeleteRetentionMs: 86400000}
}

// Validate reports every value out of Kafka's range: segment.bytes from
// MinSegmentBytes to math.MaxInt32, min.cleanable.dirty.ratio from 0 to 1,
// delete.retention.ms 0 or more. Each error starts with the key
// ("segment.bytes 10 is out of range ...").
func (c Compaction) Validate() []error {
	var errs []error
	if !segmentBytesOK(c.SegmentBytes) {
		errs = append(errs, fmt.Errorf("segment.bytes %d is out of range (from %d to %d bytes)", c.SegmentBytes, MinSegmentBytes, math.MaxInt32))
	}
	if !dirtyRatioOK(c.DirtyRatio) {
		errs = append(errs, fmt.Errorf("min.cleanable.dirty.ratio %v is out of range (from 0 to 1)", c.DirtyRatio))
	}
	if c.DeleteRetentionMs < 0 {
		errs = append(errs, fmt.Errorf("delete.retention.ms %d must not be negative", c.DeleteRetentionMs))
	}
	return errs
}

func segmentBytesOK(n int64) bool { return n >= MinSegmentBytes && n <= math.MaxInt32 }
func dirtyRatioOK(f float64) bool { return f >= 0 && f <= 1 }
