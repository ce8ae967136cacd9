package topics

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tierd/tierd/cluster"
)

func i64(v int64) *int64 { return &v }
func yes(b bool) *bool   { return &b }
func str(s string) *string {
	return &s
}

// defaults are copier.Config's defaults as TopicDefaults gives them, but
// for copier.log.*, left unset: Kafka's defaults apply.
func defaults() Defaults {
	return Defaults{RemoteStorageEnable: true, LogCleanupPolicy: "delete",
		Compaction: DefaultCompaction(), ClusterTopicConfigs: true}
}

func dynamic(v string) cluster.ConfigValue {
	return cluster.ConfigValue{Value: v, Source: "DYNAMIC_TOPIC_CONFIG"}
}

// kafkaDefault is a value the cluster reports from Kafka's built-in
// defaults: it overrides nothing.
func kafkaDefault(v string) cluster.ConfigValue {
	return cluster.ConfigValue{Value: v, Source: DefaultConfigSource, IsDefault: true}
}

const week = 604800000

var (
	weekLimits = Limits{RetentionMs: week, RetentionBytes: -1, LocalRetentionMs: week, LocalRetentionBytes: -1}
	tiered     = Tiering{Enabled: true, EnabledFrom: "copier.remote.storage.enable", CopyDisabledFrom: "default", DeleteOnFrom: "default"}
	deletes    = CleanupPolicy{Delete: true}
)

// TestResolve: each layer over the one below (Kafka's default,
// copier.log.*, the topic's entry, the cluster's value set other than by
// Kafka's built-in default) and Kafka's rules on the result.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name     string
		defaults func(*Defaults)
		entry    TopicConfig
		configs  map[string]cluster.ConfigValue
		limits   Limits
		warning  string // a substring of the only warning; "" for none
		tiering  Tiering
		policy   CleanupPolicy
		from     map[string]string // some of Settings.From
	}{
		{name: "default only", limits: weekLimits, tiering: tiered, policy: deletes,
			from: map[string]string{RetentionMsConfig: "default", LocalRetentionBytesConfig: "default", CleanupPolicyConfig: "copier.log.cleanup.policy",
				SegmentBytesConfig: "copier.remote_compaction.segment.bytes"}},
		{name: "log.* set", defaults: func(d *Defaults) {
			d.Retention.RetentionMs, d.Retention.RetentionBytes, d.Retention.LocalRetentionMs = i64(3600_000), i64(1000), i64(60_000)
		}, limits: Limits{RetentionMs: 3600_000, RetentionBytes: 1000, LocalRetentionMs: 60_000, LocalRetentionBytes: 1000}, tiering: tiered, policy: deletes,
			from: map[string]string{RetentionMsConfig: "copier.log.retention.ms", LocalRetentionMsConfig: "copier.log.local.retention.ms"}},
		{name: "topic entry overriding", defaults: func(d *Defaults) { d.Retention.RetentionMs = i64(3600_000) },
			entry:  TopicConfig{Retention: Retention{RetentionMs: i64(7200_000), LocalRetentionBytes: i64(500)}, CleanupPolicy: str("compact")},
			limits: Limits{RetentionMs: 7200_000, RetentionBytes: -1, LocalRetentionMs: 7200_000, LocalRetentionBytes: 500}, tiering: tiered,
			policy: CleanupPolicy{Compact: true},
			from:   map[string]string{RetentionMsConfig: "copier.topics.orders", CleanupPolicyConfig: "copier.topics.orders"}},
		{name: "cluster value overriding, Kafka's built-in default ignored",
			entry: TopicConfig{Retention: Retention{RetentionMs: i64(7200_000)}, RemoteStorageEnable: yes(true)},
			configs: map[string]cluster.ConfigValue{RetentionMsConfig: dynamic("3600000"),
				RetentionBytesConfig:      {Value: "100", Source: "DYNAMIC_BROKER_CONFIG"},
				LocalRetentionMsConfig:    kafkaDefault("-2"),
				LocalRetentionBytesConfig: {Value: "-1", Source: DefaultConfigSource}, // by its source alone
				RemoteStorageEnableConfig: {Value: "false", IsDefault: true}},         // by IsDefault alone
			limits:  Limits{RetentionMs: 3600_000, RetentionBytes: 100, LocalRetentionMs: 3600_000, LocalRetentionBytes: 100},
			tiering: Tiering{Enabled: true, EnabledFrom: "copier.topics.orders", CopyDisabledFrom: "default", DeleteOnFrom: "default"}, policy: deletes,
			from: map[string]string{RetentionMsConfig: "cluster DYNAMIC_TOPIC_CONFIG", RetentionBytesConfig: "cluster DYNAMIC_BROKER_CONFIG",
				LocalRetentionMsConfig: "default", LocalRetentionBytesConfig: "default", RemoteStorageEnableConfig: "copier.topics.orders"}},
		{name: "local > total clamped with a warning", entry: TopicConfig{Retention: Retention{RetentionMs: i64(60_000), LocalRetentionMs: i64(120_000)}},
			limits: Limits{RetentionMs: 60_000, RetentionBytes: -1, LocalRetentionMs: 60_000, LocalRetentionBytes: -1}, warning: "local.retention.ms 120000 is larger than the total 60000; using 60000",
			tiering: tiered, policy: deletes},
		{name: "local unlimited under a limited total clamped", entry: TopicConfig{Retention: Retention{RetentionBytes: i64(1000), LocalRetentionBytes: i64(-1)}},
			limits: Limits{RetentionMs: week, RetentionBytes: 1000, LocalRetentionMs: week, LocalRetentionBytes: 1000}, warning: "local.retention.bytes -1 is larger than the total 1000",
			tiering: tiered, policy: deletes},
		{name: "-2 same as total", defaults: func(d *Defaults) { d.Retention.RetentionBytes = i64(1000) },
			entry:  TopicConfig{Retention: Retention{LocalRetentionMs: i64(-2), LocalRetentionBytes: i64(-2)}},
			limits: Limits{RetentionMs: week, RetentionBytes: 1000, LocalRetentionMs: week, LocalRetentionBytes: 1000}, tiering: tiered, policy: deletes},
		{name: "-1 unlimited", entry: TopicConfig{Retention: Retention{RetentionMs: i64(-1), RetentionBytes: i64(-1), LocalRetentionMs: i64(-1), LocalRetentionBytes: i64(500)}},
			limits: Limits{RetentionMs: -1, RetentionBytes: -1, LocalRetentionMs: -1, LocalRetentionBytes: 500}, tiering: tiered, policy: deletes},
		{name: "remote.storage.enable false + remote.log.delete.on.disable",
			entry:   TopicConfig{RemoteStorageEnable: yes(false)},
			configs: map[string]cluster.ConfigValue{RemoteLogDeleteOnDisableConfig: dynamic("true")}, limits: weekLimits,
			tiering: Tiering{Enabled: false, DeleteOnDisable: true, EnabledFrom: "copier.topics.orders", CopyDisabledFrom: "default", DeleteOnFrom: "cluster DYNAMIC_TOPIC_CONFIG"},
			policy:  deletes},
		{name: "remote.log.copy.disable: local follows total (KIP-950)",
			defaults: func(d *Defaults) { d.Retention.LocalRetentionMs, d.Retention.LocalRetentionBytes = i64(0), i64(10) },
			entry:    TopicConfig{Retention: Retention{RetentionBytes: i64(1000)}, RemoteLogCopyDisable: yes(true)},
			limits:   Limits{RetentionMs: week, RetentionBytes: 1000, LocalRetentionMs: week, LocalRetentionBytes: 1000},
			tiering:  Tiering{Enabled: true, CopyDisabled: true, EnabledFrom: "copier.remote.storage.enable", CopyDisabledFrom: "copier.topics.orders", DeleteOnFrom: "default"},
			policy:   deletes, from: map[string]string{LocalRetentionMsConfig: "copier.log.local.retention.ms"}},
		{name: "cleanup.policy compact,delete", entry: TopicConfig{CleanupPolicy: str("compact")},
			configs: map[string]cluster.ConfigValue{CleanupPolicyConfig: dynamic("delete, compact")},
			limits:  weekLimits, tiering: tiered, policy: CleanupPolicy{Compact: true, Delete: true},
			from: map[string]string{CleanupPolicyConfig: "cluster DYNAMIC_TOPIC_CONFIG"}},
		{name: "unparsable cluster values ignored", entry: TopicConfig{Retention: Retention{RetentionMs: i64(60_000)}},
			configs: map[string]cluster.ConfigValue{RetentionMsConfig: dynamic("1h"), RetentionBytesConfig: dynamic(""),
				RemoteStorageEnableConfig: dynamic("no"), CleanupPolicyConfig: dynamic("compress"), SegmentBytesConfig: dynamic("10")},
			limits: Limits{RetentionMs: 60_000, RetentionBytes: -1, LocalRetentionMs: 60_000, LocalRetentionBytes: -1}, tiering: tiered, policy: deletes,
			from: map[string]string{RetentionMsConfig: "copier.topics.orders", RetentionBytesConfig: "default", CleanupPolicyConfig: "copier.log.cleanup.policy",
				SegmentBytesConfig: "copier.remote_compaction.segment.bytes"}},
		{name: "cluster_topic_configs off: the cluster ignored", defaults: func(d *Defaults) { d.ClusterTopicConfigs = false },
			configs: map[string]cluster.ConfigValue{RetentionMsConfig: dynamic("3600000"), RemoteStorageEnableConfig: dynamic("false")},
			limits:  weekLimits, tiering: tiered, policy: deletes, from: map[string]string{RetentionMsConfig: "default"}},
		{name: "log.cleanup.policy empty: Kafka's delete", defaults: func(d *Defaults) { d.LogCleanupPolicy = "" },
			limits: weekLimits, tiering: tiered, policy: deletes, from: map[string]string{CleanupPolicyConfig: "default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := defaults()
			if tc.defaults != nil {
				tc.defaults(&d)
			}
			s := Resolve("orders", d, tc.entry, tc.configs)
			if s.Limits != tc.limits {
				t.Errorf("limits %+v, want %+v", s.Limits, tc.limits)
			}
			switch {
			case tc.warning == "" && len(s.Warnings) != 0:
				t.Errorf("warnings %q, want none", s.Warnings)
			case tc.warning != "" && (len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], tc.warning)):
				t.Errorf("warnings %q, want one saying %q", s.Warnings, tc.warning)
			}
			if s.Tiering != tc.tiering {
				t.Errorf("tiering %+v, want %+v", s.Tiering, tc.tiering)
			}
			if s.CleanupPolicy != tc.policy {
				t.Errorf("cleanup.policy %s, want %s", s.CleanupPolicy, tc.policy)
			}
			for name, want := range tc.from {
				if s.From[name] != want {
					t.Errorf("%s from %q, want %q", name, s.From[name], want)
				}
			}
			if len(s.From) != 11 {
				t.Errorf("From names %d settings, want 11: %v", len(s.From), s.From)
			}
		})
	}
}

// TestResolveCompaction: copier.remote_compaction, then the topic's
// entry, then a value the cluster set for the topic; Kafka's built-in
// defaults from the cluster and unparsable or out-of-range values are
// ignored, and each value names its source.
func TestResolveCompaction(t *testing.T) {
	d := defaults()
	d.Compaction.SegmentBytes = 2000
	ratio, horizon, tiny := 0.1, int64(60000), int64(10)
	entry := TopicConfig{MinCleanableDirtyRatio: &ratio, DeleteRetentionMs: &horizon, SegmentBytes: &tiny}
	s := Resolve("orders", d, entry, nil)
	if s.Compaction != (Compaction{SegmentBytes: 2000, DirtyRatio: 0.1, DeleteRetentionMs: 60000}) ||
		s.From[SegmentBytesConfig] != "copier.remote_compaction.segment.bytes" || s.From[MinCleanableDirtyRatioConfig] != "copier.topics.orders" {
		t.Fatalf("from the file: %+v %v", s.Compaction, s.From)
	}
	configs := map[string]cluster.ConfigValue{
		SegmentBytesConfig:           dynamic("4096"),
		MinCleanableDirtyRatioConfig: kafkaDefault("0.5"),
		DeleteRetentionMsConfig:      dynamic("soon"),
	}
	s = Resolve("orders", d, entry, configs)
	if s.Compaction != (Compaction{SegmentBytes: 4096, DirtyRatio: 0.1, DeleteRetentionMs: 60000}) ||
		s.From[SegmentBytesConfig] != "cluster DYNAMIC_TOPIC_CONFIG" || s.From[DeleteRetentionMsConfig] != "copier.topics.orders" {
		t.Fatalf("with the cluster: %+v %v", s.Compaction, s.From)
	}
	if s := Resolve("other", d, TopicConfig{}, configs); s.Compaction.DirtyRatio != 0.5 || s.Compaction.DeleteRetentionMs != DefaultCompaction().DeleteRetentionMs {
		t.Fatalf("a topic without an entry: %+v", s.Compaction)
	}
	if errs := entry.Validate("copier: topics: orders: "); len(errs) != 1 || !strings.Contains(errs[0].Error(), "copier: topics: orders: segment.bytes 10 is out of range") {
		t.Fatalf("Validate took segment.bytes 10 in a topic's entry: %v", errs)
	}
}

// TestExplain names each of a topic's settings' source, the remote
// compaction ones only for a compacted topic.
func TestExplain(t *testing.T) {
	d := defaults()
	d.Retention = LogRetention(DefaultRetention()) // copier.Config's
	d.Retention.RetentionBytes = i64(1000)
	entry := TopicConfig{Retention: Retention{LocalRetentionMs: i64(60_000)}, RemoteLogCopyDisable: yes(true)}
	configs := map[string]cluster.ConfigValue{
		RetentionMsConfig:         dynamic("3600000"),
		RemoteStorageEnableConfig: kafkaDefault("false"),
		CleanupPolicyConfig:       dynamic("delete,compact"),
	}
	want := []Value{
		{"retention.ms", "3600000", "cluster DYNAMIC_TOPIC_CONFIG"}, {"retention.bytes", "1000", "copier.log.retention.bytes"},
		{"local.retention.ms", "60000", "copier.topics.orders"}, {"local.retention.bytes", "-2", "copier.log.local.retention.bytes"},
		{"remote.storage.enable", "true", "copier.remote.storage.enable"}, {"remote.log.copy.disable", "true", "copier.topics.orders"},
		{"remote.log.delete.on.disable", "false", "default"}, {"cleanup.policy", "compact,delete", "cluster DYNAMIC_TOPIC_CONFIG"},
		{"segment.bytes", "1073741824", "copier.remote_compaction.segment.bytes"},
		{"min.cleanable.dirty.ratio", "0.5", "copier.remote_compaction.min.cleanable.dirty.ratio"},
		{"delete.retention.ms", "86400000", "copier.remote_compaction.delete.retention.ms"},
	}
	if got := Resolve("orders", d, entry, configs).Explain(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Explain:\n got %v\nwant %v", got, want)
	}
	if got := Resolve("orders", d, entry, nil).Explain(); len(got) != 8 {
		t.Fatalf("Explain of a topic without compact lists %d settings, want the eight: %v", len(got), got)
	}
}

// TestResolveSharesNoPointer: writing through the resolved retention
// leaves the config's values alone.
func TestResolveSharesNoPointer(t *testing.T) {
	d := defaults()
	d.Retention = LogRetention(DefaultRetention())
	entry := TopicConfig{Retention: Retention{RetentionMs: i64(60_000)}}
	s := Resolve("orders", d, entry, nil)
	*s.Retention.RetentionMs, *s.Retention.RetentionBytes = 1, 1
	if *entry.RetentionMs != 60_000 || *d.Retention.RetentionBytes != -1 {
		t.Fatalf("the config changed: retention.ms %d, log.retention.bytes %d", *entry.RetentionMs, *d.Retention.RetentionBytes)
	}
}
