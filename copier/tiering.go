package copier

import (
	"fmt"
	"strings"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/remotelog"
)

// topicSettings is what a pass applies to one topic: the pure resolution
// (package topics) and whether the cluster's view of the topic was known.
type topicSettings struct {
	topics.Settings
	// known is false when a cluster is configured and none of the
	// topic's configs were read yet: then no retention runs and no
	// deletion is ordered (tierd.yaml's values might be far shorter than
	// the cluster's).
	known bool
}

// settings returns a topic's retention and tiering policy as
// topics.Resolve has it from tierd.yaml and the cluster's topic configs
// (when ClusterTopicConfigs is on and the cluster view is fresh enough to
// act on). Each override by the cluster is logged once. When this pass
// could not read the topic's configs, the last ones read stand in.
func (c *Copier) settings(topic string) topicSettings {
	known := true
	var configs map[string]cluster.ConfigValue
	if v, err := c.freshView(); err == nil && c.cfg.ClusterTopicConfigs {
		if t, ok := v.Topics[topic]; ok {
			configs = c.topicConfigs(topic, t)
			known = configs != nil
		}
	}
	st := topicSettings{Settings: c.cfg.resolve(topic, configs), known: known}
	if configs != nil {
		own := map[string]string{}
		for _, v := range c.cfg.resolve(topic, nil).Values() {
			own[v.Name] = v.Value
		}
		for _, v := range st.Values() {
			if cv, ok := configs[v.Name]; ok && strings.HasPrefix(v.From, "cluster ") && v.Value != own[v.Name] {
				if c.once(fmt.Sprintf("override %s %s %s", topic, v.Name, cv.Value)) {
					c.log.Info("topic config from the cluster overrides tierd.yaml", "topic", topic, "config", v.Name, "value", cv.Value, "source", cv.Source)
				}
			}
		}
	}
	return st
}

// leftAlone reports a topic whose tiering is off and whose copies stay:
// nothing is copied or deleted, locally or remotely; its copies stay
// readable.
func (c *Copier) leftAlone(tp remotelog.TopicPartition, t topics.Tiering) {
	c.wait(tp, remotelog.WaitTieringDisabled, "tiering is off for the topic: "+t.String())
	if c.once("disabled " + tp.Topic + "\x00") {
		c.log.Info("tiering is off for the topic: left alone (no copy, no retention); its remote copies stay and are served. "+
			"Set remote.log.delete.on.disable=true to delete them", "topic", tp.Topic, "policy", t.String())
	}
}
