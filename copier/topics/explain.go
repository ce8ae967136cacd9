package topics

import "strconv"

// Value is one of a topic's settings as a pass applies it: Kafka's topic
// config name, the value as text, and where it came from (see
// Settings.From).
type Value struct {
	Name, Value, From string
}

// Explain lists the topic's eight settings (retention.ms,
// retention.bytes, local.retention.ms, local.retention.bytes,
// remote.storage.enable, remote.log.copy.disable,
// remote.log.delete.on.disable, cleanup.policy; see Values), then, when
// cleanup.policy has compact, its remote compaction's three
// (segment.bytes, min.cleanable.dirty.ratio, delete.retention.ms; see
// CompactionValues). Retention values are as set: -2 and -1 keep their
// meaning.
func (s Settings) Explain() []Value {
	return append(s.Values(), s.CompactionValues()...)
}

// Values lists the eight settings of every topic, in Explain's order.
func (s Settings) Values() []Value {
	var out []Value
	for _, n := range []struct {
		name string
		p    *int64
	}{{RetentionMsConfig, s.Retention.RetentionMs}, {RetentionBytesConfig, s.Retention.RetentionBytes},
		{LocalRetentionMsConfig, s.Retention.LocalRetentionMs}, {LocalRetentionBytesConfig, s.Retention.LocalRetentionBytes}} {
		v := "-"
		if n.p != nil {
			v = strconv.FormatInt(*n.p, 10)
		}
		out = append(out, Value{n.name, v, s.From[n.name]})
	}
	t := s.Tiering
	return append(out, Value{RemoteStorageEnableConfig, strconv.FormatBool(t.Enabled), t.EnabledFrom},
		Value{RemoteLogCopyDisableConfig, strconv.FormatBool(t.CopyDisabled), t.CopyDisabledFrom},
		Value{RemoteLogDeleteOnDisableConfig, strconv.FormatBool(t.DeleteOnDisable), t.DeleteOnFrom},
		Value{CleanupPolicyConfig, s.CleanupPolicy.String(), s.From[CleanupPolicyConfig]})
}

// CompactionValues lists the remote compaction settings of a topic whose
// cleanup.policy has compact; none otherwise: they apply to nothing.
func (s Settings) CompactionValues() []Value {
	if !s.CleanupPolicy.Compact {
		return nil
	}
	c := s.Compaction
	return []Value{{SegmentBytesConfig, strconv.FormatInt(c.SegmentBytes, 10), s.From[SegmentBytesConfig]},
		{MinCleanableDirtyRatioConfig, strconv.FormatFloat(c.DirtyRatio, 'g', -1, 64), s.From[MinCleanableDirtyRatioConfig]},
		{DeleteRetentionMsConfig, strconv.FormatInt(c.DeleteRetentionMs, 10), s.From[DeleteRetentionMsConfig]}}
}
