package copier

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/remotelog"
)

// Topic configs that override tierd.yaml when the cluster has them set
// (from any source but Kafka's built-in default).
const (
	cfgRetentionMs           = "retention.ms"
	cfgRetentionBytes        = "retention.bytes"
	cfgLocalRetentionMs      = "local.retention.ms"
	cfgLocalRetentionBytes   = "local.retention.bytes"
	cfgRemoteStorageEnable   = "remote.storage.enable"
	cfgRemoteLogCopyDisable  = "remote.log.copy.disable"
	cfgRemoteLogDeleteOnDis  = "remote.log.delete.on.disable"
	configSourceDefaultKafka = "DEFAULT_CONFIG"
)

// topicSettings is what a pass applies to one topic.
type topicSettings struct {
	limits  Limits
	warns   []string // clamped retention values
	tiering Tiering
	policy  CleanupPolicy // cleanup.policy
	// known is false when a cluster is configured and none of the
	// topic's configs were read yet: then no retention runs and no
	// deletion is ordered (tierd.yaml's values might be far shorter than
	// the cluster's).
	known bool
}

// settings returns a topic's retention and tiering policy: tierd.yaml's,
// with the cluster's topic configs over them (when ClusterTopicConfigs is
// on and the cluster's value is set, not Kafka's built-in default). Each
// override is logged once. When this pass could not read the topic's
// configs, the last ones read stand in. With remote.log.copy.disable on,
// local.retention.* no longer applies: local data follows the total
// retention, as KIP-950 has it.
func (c *Copier) settings(topic string) topicSettings {
	st := topicSettings{known: true}
	var configs map[string]cluster.ConfigValue
	if v, err := c.freshView(); err == nil && c.cfg.ClusterTopicConfigs {
		if t, ok := v.Topics[topic]; ok {
			configs = c.topicConfigs(topic, t)
			st.known = configs != nil
		}
	}
	r, t, from := c.cfg.resolveTopic(topic, configs)
	pol, polFrom := c.cfg.cleanupPolicy(topic, configs)
	if configs != nil {
		own := map[string]string{}
		for _, v := range c.cfg.Explain(topic, nil) {
			own[v.Name] = v.Value
		}
		for _, v := range c.cfg.explain(topic, r, t, from, pol, polFrom) {
			if cv, ok := configs[v.Name]; ok && strings.HasPrefix(v.From, "cluster ") && v.Value != own[v.Name] {
				if c.once(fmt.Sprintf("override %s %s %s", topic, v.Name, cv.Value)) {
					c.log.Info("topic config from the cluster overrides tierd.yaml", "topic", topic, "config", v.Name, "value", cv.Value, "source", cv.Source)
				}
			}
		}
	}
	st.tiering, st.policy = t, pol
	st.limits, st.warns = r.resolve()
	if t.CopyDisabled {
		st.limits.LocalRetentionMs, st.limits.LocalRetentionBytes = st.limits.RetentionMs, st.limits.RetentionBytes
	}
	return st
}

// resolveTopic resolves a topic's settings from this config (Kafka's
// defaults, the copier's log.* and remote.storage.enable, the topic's
// entry) and then the cluster's topic configs set in the cluster (not
// Kafka's built-in defaults; nil configs: none). from names the source of
// each retention setting, by Kafka's topic-level name.
func (c Config) resolveTopic(topic string, configs map[string]cluster.ConfigValue) (r Retention, t Tiering, from map[string]string) {
	from = map[string]string{}
	d, lr := DefaultRetention(), Retention(c.Retention)
	tc := c.Topics[topic]
	r = d
	for _, f := range []struct {
		name           string
		dst, log, mine **int64
	}{{cfgRetentionMs, &r.RetentionMs, &lr.RetentionMs, &tc.RetentionMs}, {cfgRetentionBytes, &r.RetentionBytes, &lr.RetentionBytes, &tc.RetentionBytes},
		{cfgLocalRetentionMs, &r.LocalRetentionMs, &lr.LocalRetentionMs, &tc.LocalRetentionMs},
		{cfgLocalRetentionBytes, &r.LocalRetentionBytes, &lr.LocalRetentionBytes, &tc.LocalRetentionBytes}} {
		from[f.name] = "default"
		if *f.log != nil {
			*f.dst, from[f.name] = *f.log, "copier.log."+f.name
		}
		if *f.mine != nil {
			*f.dst, from[f.name] = *f.mine, "copier.topics."+topic
		}
		if cv, ok := setInCluster(configs, f.name); ok {
			if n, err := strconv.ParseInt(cv.Value, 10, 64); err == nil {
				*f.dst, from[f.name] = &n, "cluster "+cv.Source
			}
		}
	}
	t = c.tiering(topic)
	for _, f := range []struct {
		name string
		dst  *bool
		from *string
	}{{cfgRemoteStorageEnable, &t.Enabled, &t.EnabledFrom}, {cfgRemoteLogCopyDisable, &t.CopyDisabled, &t.CopyDisabledFrom},
		{cfgRemoteLogDeleteOnDis, &t.DeleteOnDisable, &t.DeleteOnFrom}} {
		if cv, ok := setInCluster(configs, f.name); ok {
			if b, err := strconv.ParseBool(cv.Value); err == nil {
				*f.dst, *f.from = b, "cluster "+cv.Source
			}
		}
	}
	return r, t, from
}

// setInCluster returns a topic config the cluster has set (from any
// source but Kafka's built-in default).
func setInCluster(configs map[string]cluster.ConfigValue, name string) (cluster.ConfigValue, bool) {
	cv, ok := configs[name]
	return cv, ok && !cv.IsDefault && cv.Source != configSourceDefaultKafka
}

// TopicValue is one of a topic's settings as a pass applies it, with
// where it came from: "default", a copier key ("copier.log.retention.ms",
// "copier.remote.storage.enable"), the topic's entry
// ("copier.topics.orders") or the cluster ("cluster
// DYNAMIC_TOPIC_CONFIG").
type TopicValue struct {
	Name, Value, From string
}

// Explain lists a topic's eight settings (retention.ms, retention.bytes,
// local.retention.ms, local.retention.bytes, remote.storage.enable,
// remote.log.copy.disable, remote.log.delete.on.disable, cleanup.policy),
// and for a compacted topic its remote compaction's three (segment.bytes,
// min.cleanable.dirty.ratio, delete.retention.ms), as a pass
// resolves them from this config and the cluster's topic configs (nil:
// none; ignored when ClusterTopicConfigs is off). Values are as set:
// -2 and -1 keep their meaning.
func (c Config) Explain(topic string, configs map[string]cluster.ConfigValue) []TopicValue {
	if !c.ClusterTopicConfigs {
		configs = nil
	}
	r, t, from := c.resolveTopic(topic, configs)
	pol, polFrom := c.cleanupPolicy(topic, configs)
	return append(c.explain(topic, r, t, from, pol, polFrom), c.explainCompaction(topic, configs, pol)...)
}

func (c Config) explain(topic string, r Retention, t Tiering, from map[string]string, pol CleanupPolicy, polFrom string) []TopicValue {
	var out []TopicValue
	for _, n := range []string{cfgRetentionMs, cfgRetentionBytes, cfgLocalRetentionMs, cfgLocalRetentionBytes} {
		out = append(out, TopicValue{n, explainOne(r, n), from[n]})
	}
	return append(out, TopicValue{cfgRemoteStorageEnable, strconv.FormatBool(t.Enabled), t.EnabledFrom},
		TopicValue{cfgRemoteLogCopyDisable, strconv.FormatBool(t.CopyDisabled), t.CopyDisabledFrom},
		TopicValue{cfgRemoteLogDeleteOnDis, strconv.FormatBool(t.DeleteOnDisable), t.DeleteOnFrom},
		TopicValue{cfgCleanupPolicy, pol.String(), polFrom})
}

// explainCompaction returns the remote compaction values of a topic whose
// cleanup.policy has compact (none otherwise: they apply to nothing).
func (c Config) explainCompaction(topic string, configs map[string]cluster.ConfigValue, pol CleanupPolicy) []TopicValue {
	if !pol.Compact {
		return nil
	}
	s, from := c.compaction(topic, configs)
	return []TopicValue{{cfgSegmentBytes, strconv.FormatInt(s.SegmentBytes, 10), from[cfgSegmentBytes]},
		{cfgMinCleanableRatio, strconv.FormatFloat(s.DirtyRatio, 'g', -1, 64), from[cfgMinCleanableRatio]},
		{cfgDeleteRetentionMs, strconv.FormatInt(s.DeleteRetentionMs, 10), from[cfgDeleteRetentionMs]}}
}

// explainOne returns one retention value as text.
func explainOne(r Retention, name string) string {
	p := map[string]*int64{cfgRetentionMs: r.RetentionMs, cfgRetentionBytes: r.RetentionBytes,
		cfgLocalRetentionMs: r.LocalRetentionMs, cfgLocalRetentionBytes: r.LocalRetentionBytes}[name]
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

// leftAlone reports a topic whose tiering is off and whose copies stay:
// nothing is copied or deleted, locally or remotely; its copies stay
// readable.
func (c *Copier) leftAlone(tp remotelog.TopicPartition, t Tiering) {
	c.wait(tp, remotelog.WaitTieringDisabled, "tiering is off for the topic: "+t.String())
	if c.once("disabled " + tp.Topic + "\x00") {
		c.log.Info("tiering is off for the topic: left alone (no copy, no retention); its remote copies stay and are served. "+
			"Set remote.log.delete.on.disable=true to delete them", "topic", tp.Topic, "policy", t.String())
	}
}
