package copier

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/remotelog"
)

// Cluster is what the copier asks the Kafka cluster (package cluster's
// Client): one view of topics, topic ids, partition leaders and topic
// configs per pass, and, for proof before any whole-partition deletion,
// what the cluster answers for given topic ids.
type Cluster interface {
	Describe(ctx context.Context, configTopics []string) (*cluster.View, error)
	TopicIDs(ctx context.Context, ids []string) (clusterID string, res map[string]cluster.IDStatus, err error)
}

// WithCluster makes the Kafka cluster the source of the facts a broker's
// disk cannot give: only the partitions whose leader is this broker
// (BrokerID) are copied and have remote retention applied (this replaces
// the bucket lease), topic configs override tierd.yaml's retention, and
// a topic's remote copies are scheduled for deletion only when the cluster
// answers that its topic id is unknown.
func WithCluster(cl Cluster) Option { return func(c *Copier) { c.cl = cl } }

// Errors about the cluster.
var (
	ErrClusterUnreachable = fmt.Errorf("copier: kafka cluster unreachable (%w)", remotelog.ErrCannotCheck)
	ErrWrongCluster       = fmt.Errorf("copier: kafka cluster is not the one tierd's metadata belongs to (%w)", remotelog.ErrRefused)
)

// clusterState is the last view of the cluster and how fresh it is.
type clusterState struct {
	view   *cluster.View
	viewAt time.Time // by the copier's clock
	err    error     // of the last Describe, nil after a success
	errAt  time.Time // first failure of the current outage
}

// refreshCluster reads the cluster's view for this pass. On failure the
// last view stays, and is used for ownership until it is older than
// OwnershipLease; it is never used to schedule a deletion. A view of
// another cluster than the one first recorded in the metadata store is
// refused: pointed at the wrong cluster, every topic would look deleted.
func (c *Copier) refreshCluster(ctx context.Context, parts []*partition) {
	if c.cl == nil {
		return
	}
	seen := map[string]bool{}
	var topics []string
	for _, p := range parts {
		if !seen[p.tp.Topic] {
			seen[p.tp.Topic] = true
			topics = append(topics, p.tp.Topic)
		}
	}
	sort.Strings(topics)
	v, err := c.cl.Describe(ctx, topics)
	if err == nil {
		err = c.checkClusterID(v.ClusterID)
	}
	c.stateMu.Lock()
	if err != nil {
		if c.cs.err == nil {
			c.cs.errAt = c.now()
		}
		c.cs.err = err
		since, never, age := c.cs.errAt, c.cs.view == nil, c.now().Sub(c.cs.viewAt)
		c.stateMu.Unlock()
		if c.once("cluster error " + err.Error()) {
			if never {
				c.log.Error("kafka cluster unusable and never reached: nothing is tiered until it answers", "err", err)
			} else {
				c.log.Error("kafka cluster unusable: copying goes on under the last known leadership for at most ownership_lease; no partition deletions",
					"err", err, "since", since, "last_view_age", age)
			}
		}
		return
	}
	if c.cs.err != nil {
		c.log.Info("kafka cluster reachable again", "source", v.Source, "outage", c.now().Sub(c.cs.errAt))
		c.forget("cluster error ")
		c.forget("unowned ")
	}
	c.cs = clusterState{view: v, viewAt: c.now()}
	c.stateMu.Unlock()
}

// checkClusterID records the cluster id on first contact and refuses any
// other afterwards.
func (c *Copier) checkClusterID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: the cluster sent no cluster id", ErrWrongCluster)
	}
	rec, err := c.store.ClusterID()
	if err != nil {
		return err
	}
	if rec == "" {
		c.log.Info("recording the kafka cluster id this tierd works for", "cluster_id", id)
		return c.store.SetClusterID(id)
	}
	if rec != id {
		return fmt.Errorf("%w: metadata recorded cluster id %s, kafka.bootstrap_servers reaches cluster id %s", ErrWrongCluster, rec, id)
	}
	return nil
}

// freshView returns the cluster view to act on for ownership, or nil
// (with the reason) when there is none or it is older than the lease.
func (c *Copier) freshView() (*cluster.View, error) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.cs.view == nil {
		if c.cs.err != nil {
			return nil, fmt.Errorf("%w: %v", ErrClusterUnreachable, c.cs.err)
		}
		return nil, ErrClusterUnreachable
	}
	if c.cs.err != nil && c.now().Sub(c.cs.viewAt) > c.cfg.OwnershipLease {
		return nil, fmt.Errorf("%w since %s (last view older than ownership_lease %s): %v", ErrClusterUnreachable,
			c.cs.errAt.UTC().Format(time.RFC3339), c.cfg.OwnershipLease, c.cs.err)
	}
	return c.cs.view, nil
}

// currentView returns the view of this pass only: nil when the last
// Describe failed. Deletions act on nothing older.
func (c *Copier) currentView() *cluster.View {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.cs.err != nil {
		return nil
	}
	return c.cs.view
}

// ClusterStatus says whether the cluster answered the last pass, and why
// not: for /-/ready. Without a cluster it is always ok.
func (c *Copier) ClusterStatus() (ok bool, reason string) {
	if c.cl == nil {
		return true, ""
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	switch {
	case c.cs.err != nil && c.cs.view == nil:
		return false, fmt.Sprintf("kafka cluster unusable since %s, never reached: %v; nothing is tiered until it answers",
			c.cs.errAt.UTC().Format(time.RFC3339), c.cs.err)
	case c.cs.err != nil:
		return false, fmt.Sprintf("kafka cluster unusable since %s: %v; copying under the last known leadership until %s, no partition deletions",
			c.cs.errAt.UTC().Format(time.RFC3339), c.cs.err, c.cs.viewAt.Add(c.cfg.OwnershipLease).UTC().Format(time.RFC3339))
	case c.cs.view == nil:
		return false, "kafka cluster not asked yet"
	}
	return true, ""
}

// checkClusterTopicID holds a partition whose directory's topic id is not
// the id the cluster has for the topic name (a stale directory).
func (c *Copier) checkClusterTopicID(p *partition) error {
	v := c.currentView()
	if v == nil || p.topicID == "" {
		return nil
	}
	if t, ok := v.Topics[p.tp.Topic]; ok && t.ID != "" && t.ID != p.topicID {
		return c.hold(p.tp, heldTopicIDNotInCluster, fmt.Sprintf("%s has topic id %s, the cluster has %s for topic %s",
			p.dir, p.topicID, t.ID, p.tp.Topic))
	}
	return nil
}

// resolveTopicID handles a directory whose topic id differs from the
// recorded one. Only the cluster can tell a re-created topic from a stale
// directory: when it answers that the recorded id is unknown, that
// incarnation's copies are scheduled for deletion (after the grace
// period) and the partition tiers afresh; anything else holds it.
func (c *Copier) resolveTopicID(ctx context.Context, p *partition, off remotelog.PartitionOffsets) error {
	detail := fmt.Sprintf("%s has topic id %s; tierd recorded %s", p.dir, p.topicID, off.TopicID)
	if c.cl == nil {
		return c.hold(p.tp, heldTopicIDChanged, detail+"; without a cluster to confirm the old topic is gone, "+
			"delete its copies with 'tierd topics delete --config <tierd.yaml> --topic-id "+off.TopicID+" "+p.tp.Topic+"'")
	}
	if c.currentView() == nil {
		return c.hold(p.tp, heldTopicIDChanged, detail+"; the cluster is unreachable")
	}
	if off.OperatorKept != "" {
		return c.hold(p.tp, heldTopicIDChanged, detail+"; an operator restored the old incarnation's copies ("+off.OperatorKept+
			"): delete them with 'tierd topics delete --config <tierd.yaml> --topic-id "+off.TopicID+" "+p.tp.Topic+"'")
	}
	st, err := c.idStatus(ctx, off.TopicID)
	if err != nil {
		return c.hold(p.tp, heldTopicIDChanged, fmt.Sprintf("%s; asking the cluster: %v", detail, err))
	}
	if st.State != cluster.IDGone {
		return c.hold(p.tp, heldTopicIDChanged, fmt.Sprintf("%s; the cluster does not confirm topic id %s gone: %s", detail, off.TopicID, st.Proof))
	}
	d, err := c.deletions().schedule(p.tp, off.TopicID, remotelog.ReasonTopicDeleted, st.Proof)
	if err != nil {
		return err
	}
	c.log.Warn("topic was re-created: the old incarnation's copies are scheduled for deletion; tiering starts over",
		"partition", p.tp, "old_topic_id", off.TopicID, "topic_id", p.topicID, "due", remotelog.DueText(d.DueMs), "proof", st.Proof)
	c.m.recreated.Inc()
	return nil
}

// idStatus asks the cluster about one topic id.
func (c *Copier) idStatus(ctx context.Context, id string) (cluster.IDStatus, error) {
	res, err := c.idStatuses(ctx, []string{id})
	return res[id], err
}

// idStatuses asks the cluster about topic ids, refusing the answer of
// another cluster than the recorded one.
func (c *Copier) idStatuses(ctx context.Context, ids []string) (map[string]cluster.IDStatus, error) {
	cid, res, err := c.cl.TopicIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	if err := c.checkClusterID(cid); err != nil {
		return nil, err
	}
	return res, nil
}

// topicConfigs returns the configs of a topic as this pass read them, or
// the last ones read when this pass could not (nil when none ever was).
func (c *Copier) topicConfigs(topic string, t cluster.Topic) map[string]cluster.ConfigValue {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if t.ConfigErr == nil && t.Configs != nil {
		c.configs[topic] = t.Configs
		return t.Configs
	}
	return c.configs[topic]
}

// clusterViews is the Kafka cluster as the copier last saw it, for the
// whole-partition deletions: this pass's view (currentView: nil when the
// last Describe failed), the view fresh enough to act on (freshView), and
// the cluster's answers about topic ids (idStatus, idStatuses), each
// checked against the recorded cluster id (checkClusterID).
type clusterViews interface {
	currentView() *cluster.View
	freshView() (*cluster.View, error)
	idStatus(ctx context.Context, id string) (cluster.IDStatus, error)
	idStatuses(ctx context.Context, ids []string) (map[string]cluster.IDStatus, error)
	checkClusterID(id string) error
}
