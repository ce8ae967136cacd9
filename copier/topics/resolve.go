package topics

import (
	"fmt"
	"strconv"

	"github.com/tierd/tierd/cluster"
)

// Kafka's names of the topic configs Resolve reads (Kafka's TopicConfig).
const (
	RetentionMsConfig              = "retention.ms"
	RetentionBytesConfig           = "retention.bytes"
	LocalRetentionMsConfig         = "local.retention.ms"
	LocalRetentionBytesConfig      = "local.retention.bytes"
	RemoteStorageEnableConfig      = "remote.storage.enable"
	RemoteLogCopyDisableConfig     = "remote.log.copy.disable"
	RemoteLogDeleteOnDisableConfig = "remote.log.delete.on.disable"
	CleanupPolicyConfig            = "cleanup.policy"
	SegmentBytesConfig             = "segment.bytes"
	MinCleanableDirtyRatioConfig   = "min.cleanable.dirty.ratio"
	DeleteRetentionMsConfig        = "delete.retention.ms"
)

// DefaultConfigSource is the config source Kafka gives its built-in
// defaults; a cluster value from it does not override tierd.yaml.
const DefaultConfigSource = "DEFAULT_CONFIG"

// Defaults are the settings of every topic from tierd.yaml's copier
// section (copier.Config.TopicDefaults builds them), the layer under a
// topic's own entry.
type Defaults struct {
	// Retention is copier.log.retention.ms, log.retention.bytes,
	// log.local.retention.ms and log.local.retention.bytes (ms, bytes);
	// nil fields take Kafka's defaults (DefaultRetention).
	Retention LogRetention
	// RemoteStorageEnable is copier.remote.storage.enable, every topic's
	// remote.storage.enable.
	RemoteStorageEnable bool
	// LogCleanupPolicy is copier.log.cleanup.policy; "" or an unparsable
	// value means Kafka's "delete".
	LogCleanupPolicy string
	// Compaction is copier.remote_compaction's segment.bytes (bytes),
	// min.cleanable.dirty.ratio and delete.retention.ms (ms).
	Compaction Compaction
	// ClusterTopicConfigs is copier.cluster_topic_configs: false, the
	// cluster's topic configs given to Resolve are ignored.
	ClusterTopicConfigs bool
}

// Limits are resolved retention settings of one topic: ms and bytes, -1
// is unlimited.
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

// DeletesRemote reports whether the policy orders the topic's remote
// copies deleted: tiering off and remote.log.delete.on.disable on
// (KIP-950).
func (t Tiering) DeletesRemote() bool { return !t.Enabled && t.DeleteOnDisable }

// Settings are one topic's settings as a pass applies them.
type Settings struct {
	// Topic is the topic resolved.
	Topic string
	// Retention holds the four retention values as set (ms, bytes; -2
	// and -1 keep their meaning), every field non-nil.
	Retention Retention
	// Limits are Retention after Kafka's rules: -2 takes the total
	// value, a local value larger than the total is clamped to it, and
	// with remote.log.copy.disable on the local limits are the total
	// ones (KIP-950).
	Limits Limits
	// Warnings say what the clamp changed ("local.retention.ms 120000
	// is larger than the total 60000; using 60000").
	Warnings []string
	// Tiering is remote.storage.enable, remote.log.copy.disable and
	// remote.log.delete.on.disable, with their sources.
	Tiering Tiering
	// CleanupPolicy is cleanup.policy.
	CleanupPolicy CleanupPolicy
	// Compaction is remote compaction's segment.bytes,
	// min.cleanable.dirty.ratio and delete.retention.ms, resolved
	// whatever the cleanup.policy (they apply only with compact).
	Compaction Compaction
	// From names the source of each setting by its topic config name
	// (RetentionMsConfig, ...; all eleven): "default", a copier key
	// ("copier.log.retention.ms", "copier.remote_compaction.segment.bytes"),
	// the topic's entry ("copier.topics.orders") or the cluster with its
	// config source ("cluster DYNAMIC_TOPIC_CONFIG").
	From map[string]string
}

// Resolve resolves one topic's settings. topic names it (the sources
// quote "copier.topics.<topic>"); d holds tierd.yaml's copier defaults
// (copier.Config.TopicDefaults); entry is the topic's copier.topics
// entry, the zero TopicConfig when it has none; configs are the
// cluster's topic configs by Kafka's name, nil for none, ignored unless
// d.ClusterTopicConfigs. Each setting is taken from the last of these
// that sets it: Kafka's default, d, entry, then configs when the cluster
// set it (not from DEFAULT_CONFIG, not IsDefault). Resolve returns no
// error: a cluster value that does not parse, and a remote compaction
// value out of Kafka's range (in entry or configs), are ignored, the
// layer below standing; the other values of entry are taken as they are
// (the config's Validate refuses bad ones). The Settings share no
// pointer with d or entry.
func Resolve(topic string, d Defaults, entry TopicConfig, configs map[string]cluster.ConfigValue) Settings {
	if !d.ClusterTopicConfigs {
		configs = nil
	}
	s := Settings{Topic: topic, From: map[string]string{}}
	mine := "copier.topics." + topic

	// Retention: Kafka's defaults, copier.log.*, the entry, the cluster.
	s.Retention = DefaultRetention()
	lr := Retention(d.Retention)
	for _, f := range []struct {
		name      string
		dst       **int64
		log, ours *int64
	}{{RetentionMsConfig, &s.Retention.RetentionMs, lr.RetentionMs, entry.RetentionMs},
		{RetentionBytesConfig, &s.Retention.RetentionBytes, lr.RetentionBytes, entry.RetentionBytes},
		{LocalRetentionMsConfig, &s.Retention.LocalRetentionMs, lr.LocalRetentionMs, entry.LocalRetentionMs},
		{LocalRetentionBytesConfig, &s.Retention.LocalRetentionBytes, lr.LocalRetentionBytes, entry.LocalRetentionBytes}} {
		s.From[f.name] = "default"
		if f.log != nil {
			v := *f.log
			*f.dst, s.From[f.name] = &v, "copier.log."+f.name
		}
		if f.ours != nil {
			v := *f.ours
			*f.dst, s.From[f.name] = &v, mine
		}
		if cv, ok := setInCluster(configs, f.name); ok {
			if n, err := strconv.ParseInt(cv.Value, 10, 64); err == nil {
				*f.dst, s.From[f.name] = &n, "cluster "+cv.Source
			}
		}
	}

	// Tiering: the copier's remote.storage.enable (the other two default
	// to false), the entry, the cluster.
	t := Tiering{Enabled: d.RemoteStorageEnable, EnabledFrom: "copier.remote.storage.enable", CopyDisabledFrom: "default", DeleteOnFrom: "default"}
	for _, f := range []struct {
		name string
		ours *bool
		dst  *bool
		from *string
	}{{RemoteStorageEnableConfig, entry.RemoteStorageEnable, &t.Enabled, &t.EnabledFrom},
		{RemoteLogCopyDisableConfig, entry.RemoteLogCopyDisable, &t.CopyDisabled, &t.CopyDisabledFrom},
		{RemoteLogDeleteOnDisableConfig, entry.RemoteLogDeleteOnDisable, &t.DeleteOnDisable, &t.DeleteOnFrom}} {
		if f.ours != nil {
			*f.dst, *f.from = *f.ours, mine
		}
		if cv, ok := setInCluster(configs, f.name); ok {
			if b, err := strconv.ParseBool(cv.Value); err == nil {
				*f.dst, *f.from = b, "cluster "+cv.Source
			}
		}
		s.From[f.name] = *f.from
	}
	s.Tiering = t

	// cleanup.policy: Kafka's "delete", copier.log.cleanup.policy, the
	// entry, the cluster; unparsable values are skipped.
	s.CleanupPolicy, s.From[CleanupPolicyConfig] = CleanupPolicy{Delete: true}, "default"
	for _, v := range []struct{ value, src string }{{d.LogCleanupPolicy, "copier.log.cleanup.policy"}, {deref(entry.CleanupPolicy), mine}} {
		if p, err := ParseCleanupPolicy(v.value); err == nil { // "" (not set) does not parse
			s.CleanupPolicy, s.From[CleanupPolicyConfig] = p, v.src
		}
	}
	if cv, ok := setInCluster(configs, CleanupPolicyConfig); ok {
		if p, err := ParseCleanupPolicy(cv.Value); err == nil {
			s.CleanupPolicy, s.From[CleanupPolicyConfig] = p, "cluster "+cv.Source
		}
	}

	s.Compaction = resolveCompaction(s.From, mine, d.Compaction, entry, configs)
	s.Limits, s.Warnings = limits(s.Retention)
	if t.CopyDisabled {
		// KIP-950: with copying off, local.retention.* no longer applies;
		// local data follows the total retention.
		s.Limits.LocalRetentionMs, s.Limits.LocalRetentionBytes = s.Limits.RetentionMs, s.Limits.RetentionBytes
	}
	return s
}

// resolveCompaction resolves remote compaction's three settings into
// from: copier.remote_compaction's, the entry's, the cluster's, each when
// it parses and is in range.
func resolveCompaction(from map[string]string, mine string, c Compaction, entry TopicConfig, configs map[string]cluster.ConfigValue) Compaction {
	for _, n := range []string{SegmentBytesConfig, MinCleanableDirtyRatioConfig, DeleteRetentionMsConfig} {
		from[n] = "copier.remote_compaction." + n
	}
	if v := entry.SegmentBytes; v != nil && segmentBytesOK(*v) {
		c.SegmentBytes, from[SegmentBytesConfig] = *v, mine
	}
	if v := entry.MinCleanableDirtyRatio; v != nil && dirtyRatioOK(*v) {
		c.DirtyRatio, from[MinCleanableDirtyRatioConfig] = *v, mine
	}
	if v := entry.DeleteRetentionMs; v != nil && *v >= 0 {
		c.DeleteRetentionMs, from[DeleteRetentionMsConfig] = *v, mine
	}
	if cv, ok := setInCluster(configs, SegmentBytesConfig); ok {
		if n, err := strconv.ParseInt(cv.Value, 10, 64); err == nil && segmentBytesOK(n) {
			c.SegmentBytes, from[SegmentBytesConfig] = n, "cluster "+cv.Source
		}
	}
	if cv, ok := setInCluster(configs, MinCleanableDirtyRatioConfig); ok {
		if f, err := strconv.ParseFloat(cv.Value, 64); err == nil && dirtyRatioOK(f) {
			c.DirtyRatio, from[MinCleanableDirtyRatioConfig] = f, "cluster "+cv.Source
		}
	}
	if cv, ok := setInCluster(configs, DeleteRetentionMsConfig); ok {
		if n, err := strconv.ParseInt(cv.Value, 10, 64); err == nil && n >= 0 {
			c.DeleteRetentionMs, from[DeleteRetentionMsConfig] = n, "cluster "+cv.Source
		}
	}
	return c
}

// limits applies -2 and the local <= total clamp (Kafka's LogConfig);
// warnings say what was clamped.
func limits(r Retention) (l Limits, warnings []string) {
	l = Limits{RetentionMs: *r.RetentionMs, RetentionBytes: *r.RetentionBytes,
		LocalRetentionMs: *r.LocalRetentionMs, LocalRetentionBytes: *r.LocalRetentionBytes}
	clamp := func(name string, local *int64, total int64) {
		switch {
		case *local == -2:
			*local = total
		case total >= 0 && (*local == -1 || *local > total):
			warnings = append(warnings, fmt.Sprintf("%s %d is larger than the total %d; using %d", name, *local, total, total))
			*local = total
		}
	}
	clamp(LocalRetentionMsConfig, &l.LocalRetentionMs, l.RetentionMs)
	clamp(LocalRetentionBytesConfig, &l.LocalRetentionBytes, l.RetentionBytes)
	return l, warnings
}

// setInCluster returns a topic config the cluster has set (from any
// source but Kafka's built-in default).
func setInCluster(configs map[string]cluster.ConfigValue, name string) (cluster.ConfigValue, bool) {
	cv, ok := configs[name]
	return cv, ok && !cv.IsDefault && cv.Source != DefaultConfigSource
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
