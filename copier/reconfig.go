package copier

import (
	"context"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/quota"
)

// DynamicKeys are the copier settings a running tierd takes from a
// reloaded tierd.yaml, by yaml key; "topics" covers every per-topic
// setting. Kafka draws the same line: retention, the topics' tiering,
// file.delete.delay.ms (log.segment.delete.delay.ms), the copier pool,
// the copy quota and the cleaner's settings (remote_compaction) are
// dynamic broker configs there. The others (log dirs,
// broker id, ownership, the task interval) need a restart.
var DynamicKeys = []string{
	"log.retention.ms", "log.retention.bytes", "log.local.retention.ms", "log.local.retention.bytes",
	"remote.storage.enable", "topics", "file.delete.delay.ms", "remote.log.manager.copier.thread.pool.size",
	"remote.log.manager.copy.max.bytes.per.second", "message.timestamp.after.max.ms", "index.interval.bytes",
	"copy_checks_per_pass", "copy_check_interval_ms", "deleted_row_retention", "remote.log.delete.delay.ms", "cluster_topic_configs",
	"log.cleanup.policy",
	"remote_compaction.enable", "remote_compaction.segment.bytes", "remote_compaction.min.cleanable.dirty.ratio",
	"remote_compaction.delete.retention.ms", "initial_retention_delay",
}

// setDynamic copies next's dynamic settings (DynamicKeys) into c, field
// by field, so that readers of the other fields never race a reload.
func (c *Config) setDynamic(next Config) {
	c.Retention, c.RemoteStorageEnable, c.Topics = next.Retention, next.RemoteStorageEnable, next.Topics
	c.FileDeleteDelayMs, c.CopierThreadPoolSize, c.CopyMaxBytesPerSecond = next.FileDeleteDelayMs, next.CopierThreadPoolSize, next.CopyMaxBytesPerSecond
	c.MessageTimestampAfterMaxMs, c.IndexIntervalBytes = next.MessageTimestampAfterMaxMs, next.IndexIntervalBytes
	c.CopyChecksPerPass, c.DeletedRowRetention, c.RemoteLogDeleteDelayMs = next.CopyChecksPerPass, next.DeletedRowRetention, next.RemoteLogDeleteDelayMs
	c.ClusterTopicConfigs, c.Source, c.CopyCheckIntervalMs = next.ClusterTopicConfigs, next.Source, next.CopyCheckIntervalMs
	c.LogCleanupPolicy = next.LogCleanupPolicy
	c.RemoteCompaction = next.RemoteCompaction
	c.InitialRetentionDelay = next.InitialRetentionDelay
}

// WithDynamic returns c with next's dynamic settings (DynamicKeys): what
// a running copier given next by Reconfigure runs with.
func (c Config) WithDynamic(next Config) Config {
	c.setDynamic(next)
	return c
}

// initDynamic sets up what Reconfigure changes: the copy quota and its
// metric.
func (c *Copier) initDynamic() {
	c.copyQuota = quota.New(c.cfg.CopyMaxBytesPerSecond)
	promauto.With(c.reg).NewCounterFunc(prometheus.CounterOpts{Name: "tierd_copier_copy_throttle_seconds_total",
		Help: "Time copies waited for the copy quota (remote.log.manager.copy.max.bytes.per.second), summed over the copies in flight."},
		func() float64 { return c.copyQuota.Waited().Seconds() })
}

// throttle is rsm.SegmentFiles.Throttle for the copy quota.
func (c *Copier) throttle(ctx context.Context, r io.Reader) io.Reader {
	return quota.Reader(ctx, r, c.copyQuota)
}

// Reconfigure takes next's dynamic settings (DynamicKeys; the others are
// ignored): the copy quota at once, the rest from the start of the next
// pass. It returns the error of Validate for the config that would run,
// and then changes nothing.
func (c *Copier) Reconfigure(next Config) error {
	merged := c.base.WithDynamic(next)
	if err := merged.Validate(); err != nil {
		return fmt.Errorf("copier: reconfigure: %w", err)
	}
	c.copyQuota.SetRate(merged.CopyMaxBytesPerSecond)
	c.stateMu.Lock()
	c.pending = &merged
	c.stateMu.Unlock()
	return nil
}

// applyPending starts using the config Reconfigure took. c.mu is held (a
// pass is starting).
func (c *Copier) applyPending() {
	c.stateMu.Lock()
	p := c.pending
	c.pending = nil
	c.stateMu.Unlock()
	if p != nil {
		c.cfg.setDynamic(*p)
	}
}
