package groups

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
)

// HighWatermarks returns a partition's high watermark (the offset after
// the last record served), for the lag metric; an error leaves the
// partition's lag out of that scrape.
type HighWatermarks func(ctx context.Context, tp remotelog.TopicPartition) (int64, error)

// WithRegisterer registers the coordinator's metrics with reg (default:
// none). Metrics:
//
//	tierd_kafka_groups{state}                      groups per state
//	tierd_kafka_group_members{group}               members of each group with any
//	tierd_kafka_group_lag{group,topic,partition}   high watermark minus the committed offset
//	                                               (WithHighWatermarks; at most 10000 series)
//	tierd_kafka_group_rebalances_total             join phases completed with members
//	tierd_kafka_group_members_removed_total{reason} session_expired, left, not_rejoined, not_synced
//	tierd_kafka_group_offsets_committed_total      partitions committed (durably)
//	tierd_kafka_group_commit_failures_total        commits the store refused
//	tierd_kafka_group_offsets_expired_total        partitions' offsets expired (offsets.retention.minutes)
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *Coordinator) { c.reg = reg } }

// WithHighWatermarks gives the lag metric its high watermarks (default:
// no lag metric).
func WithHighWatermarks(hw HighWatermarks) Option { return func(c *Coordinator) { c.hw = hw } }

// scrapeTimeout bounds the high watermark lookups of one scrape.
const scrapeTimeout = 5 * time.Second

// maxLagSeries bounds the lag series of one scrape (a group's committed
// partitions past it are left out).
const maxLagSeries = 10000

type metrics struct {
	rebalances, committed, commitFailures, expired prometheus.Counter
	removed                                        *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "tierd_kafka_group_rebalances_total",
			Help: "Join phases of consumer groups completed with members (a new generation)."}),
		committed: prometheus.NewCounter(prometheus.CounterOpts{Name: "tierd_kafka_group_offsets_committed_total",
			Help: "Partitions' offsets committed to consumer groups, durably."}),
		commitFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "tierd_kafka_group_commit_failures_total",
			Help: "OffsetCommits the metadata store refused (answered COORDINATOR_NOT_AVAILABLE)."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "tierd_kafka_group_offsets_expired_total",
			Help: "Partitions' committed offsets expired by offsets.retention.minutes."}),
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tierd_kafka_group_members_removed_total",
			Help: "Members removed from consumer groups, by reason: session_expired, left, not_rejoined (rebalance timeout), not_synced."}, []string{"reason"}),
	}
}

func (c *Coordinator) register() error {
	if c.reg == nil {
		return nil
	}
	for _, col := range []prometheus.Collector{c.m.rebalances, c.m.committed, c.m.commitFailures, c.m.expired, c.m.removed, (*collector)(c)} {
		if err := c.reg.Register(col); err != nil {
			return fmt.Errorf("groups: metrics: %w", err)
		}
	}
	return nil
}

// collector is the coordinator's gauges, read at each scrape.
type collector Coordinator

var (
	groupsDesc  = prometheus.NewDesc("tierd_kafka_groups", "Consumer groups kept, by state.", []string{"state"}, nil)
	membersDesc = prometheus.NewDesc("tierd_kafka_group_members", "Members of each consumer group that has any.", []string{"group"}, nil)
	lagDesc     = prometheus.NewDesc("tierd_kafka_group_lag", "Records between a group's committed offset and the partition's high watermark.",
		[]string{"group", "topic", "partition"}, nil)
)

func (col *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupsDesc
	ch <- membersDesc
	ch <- lagDesc
}

func (col *collector) Collect(ch chan<- prometheus.Metric) {
	c := (*Coordinator)(col)
	type commit struct {
		group string
		tp    remotelog.TopicPartition
		at    int64
	}
	states := map[State]int{Empty: 0, PreparingRebalance: 0, CompletingRebalance: 0, Stable: 0}
	var commits []commit
	c.mu.Lock()
	for name, g := range c.groups {
		states[g.state]++
		if n := len(g.members); n > 0 {
			ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(n), name)
		}
		if c.hw != nil {
			for tp, o := range g.offsets {
				if len(commits) == maxLagSeries {
					break
				}
				commits = append(commits, commit{name, tp, o.Offset})
			}
		}
	}
	c.mu.Unlock()
	for s, n := range states {
		ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, float64(n), string(s))
	}
	if len(commits) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	hw := c.highWatermarks(ctx)
	for _, cm := range commits {
		if v, ok := hw(cm.tp); ok {
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(max(v-cm.at, 0)), cm.group, cm.tp.Topic, fmt.Sprint(cm.tp.Partition))
		}
	}
}
