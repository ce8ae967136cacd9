package copier

import (
	"fmt"
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
// cluster has set for the topic overrides these (see
// Config.ClusterTopicConfigs).
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

// Limits are resolved retention settings of one topic: -1 is unlimited.
type Limits struct {
	RetentionMs, RetentionBytes           int64
	LocalRetentionMs, LocalRetentionBytes int64
}

// Tiering is a topic's resolved tiering policy (KIP-405, KIP-950) and
// where each of its three values came from: "default", the copier's
// "copier.remote.storage.enable", the topic's entry
// ("copier.topics.orders"), or the cluster with its config source
// ("cluster DYNAMIC_TOPIC_CONFIG").
type Tiering struct {
	Enabled, CopyDisabled, DeleteOnDisable      bool
	EnabledFrom, CopyDisabledFrom, DeleteOnFrom string
}

// String names the policy and its sources, as a deletion's proof quotes
// it.
func (t Tiering) String() string {
	return fmt.Sprintf("remote.storage.enable=%t (%s), remote.log.copy.disable=%t (%s), remote.log.delete.on.disable=%t (%s)",
		t.Enabled, t.EnabledFrom, t.CopyDisabled, t.CopyDisabledFrom, t.DeleteOnDisable, t.DeleteOnFrom)
}

// deletesRemote reports whether the policy orders the topic's remote
// copies deleted: tiering off and remote.log.delete.on.disable on.
func (t Tiering) deletesRemote() bool { return !t.Enabled && t.DeleteOnDisable }

// DefaultRetention returns Kafka's defaults.
func DefaultRetention() Retention {
	// One variable per field: a config decoder writes through these
	// pointers, so a shared one would set both local limits at once.
	ms, bytes, localMs, localBytes := int64(7*24*3600*1000), int64(-1), int64(-2), int64(-2)
	return Retention{RetentionMs: &ms, RetentionBytes: &bytes, LocalRetentionMs: &localMs, LocalRetentionBytes: &localBytes}
}

func val(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}

// resolve applies -2 and the local <= total clamp. warnings say what was
// clamped.
func (r Retention) resolve() (l Limits, warnings []string) {
	d := DefaultRetention()
	l = Limits{
		RetentionMs: val(r.RetentionMs, *d.RetentionMs), RetentionBytes: val(r.RetentionBytes, *d.RetentionBytes),
		LocalRetentionMs: val(r.LocalRetentionMs, -2), LocalRetentionBytes: val(r.LocalRetentionBytes, -2),
	}
	clamp := func(name string, local *int64, total int64) {
		switch {
		case *local == -2:
			*local = total
		case total >= 0 && (*local == -1 || *local > total):
			warnings = append(warnings, fmt.Sprintf("%s %d is larger than the total %d; using %d", name, *local, total, total))
			*local = total
		}
	}
	clamp("local.retention.ms", &l.LocalRetentionMs, l.RetentionMs)
	clamp("local.retention.bytes", &l.LocalRetentionBytes, l.RetentionBytes)
	return l, warnings
}

// validate checks the values; prefix names the keys ("log." for the
// broker-level ones).
func (r Retention) validate(where, prefix string) []error {
	var errs []error
	for _, f := range []struct {
		name string
		p    *int64
		min  int64
	}{{"retention.ms", r.RetentionMs, -1}, {"retention.bytes", r.RetentionBytes, -1},
		{"local.retention.ms", r.LocalRetentionMs, -2}, {"local.retention.bytes", r.LocalRetentionBytes, -2}} {
		if f.p != nil && *f.p < f.min {
			errs = append(errs, fmt.Errorf("%s%s%s %d: must be %d or more", where, prefix, f.name, *f.p, f.min))
		}
	}
	return errs
}

// tiering resolves a topic's policy from this config alone: the copier's
// remote.storage.enable, then the topic's entry.
func (c Config) tiering(topic string) Tiering {
	t := Tiering{Enabled: c.RemoteStorageEnable, EnabledFrom: "copier.remote.storage.enable", CopyDisabledFrom: "default", DeleteOnFrom: "default"}
	tc, ok := c.Topics[topic]
	if !ok {
		return t
	}
	for _, f := range []struct {
		src  *bool
		dst  *bool
		from *string
	}{{tc.RemoteStorageEnable, &t.Enabled, &t.EnabledFrom}, {tc.RemoteLogCopyDisable, &t.CopyDisabled, &t.CopyDisabledFrom},
		{tc.RemoteLogDeleteOnDisable, &t.DeleteOnDisable, &t.DeleteOnFrom}} {
		if f.src != nil {
			*f.dst, *f.from = *f.src, "copier.topics."+topic
		}
	}
	return t
}
