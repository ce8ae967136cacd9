package copier

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/saturate"
)

// Config configures the copier. Defaults are in DefaultConfig.
type Config struct {
	// LogDirs are Kafka log directories holding "<topic>-<partition>"
	// partition directories. Required.
	LogDirs []string `yaml:"log_dirs"`
	// TaskIntervalMs is the time between sync passes, ms (Kafka's
	// remote.log.manager.task.interval.ms), from 1 to 9223372036854
	// (saturate.MaxMillis, about 292 years: the longest interval a timer
	// takes; Validate refuses more rather than wrap). Default 30000.
	TaskIntervalMs int64 `yaml:"remote.log.manager.task.interval.ms"`
	// CopyTimeout bounds one segment copy. Default 5m.
	CopyTimeout time.Duration `yaml:"copy_timeout"`
	// BrokerOwned says in which log dirs tierd may delete local files
	// (local retention: rolled segments with a finished copy renamed to
	// .deleted, removed file.delete.delay.ms later). In a broker-owned log
	// dir tierd renames and deletes nothing: it only copies, the broker's
	// own retention trims the local log, and segments that vanish before
	// their copy are reported as gaps.
	//
	//   - true: every log dir is broker-owned.
	//   - false: tierd applies local retention in every log dir no
	//     running broker holds: an explicit choice, for log dirs nobody
	//     else writes (a stopped or decommissioned broker's, tierd's
	//     embedded segment log's).
	//   - unset (nil, the default): the Kafka log dirs, those holding
	//     meta.properties or .lock, are broker-owned (a stopped broker may
	//     start again at any time); tierd applies local retention in the
	//     others (tierd's embedded segment log, the demo's).
	//
	// Whatever the setting, a log dir is broker-owned while a process
	// holds a lock on its .lock (a running Kafka broker does, from start
	// to shutdown: FileChannel.tryLock, an fcntl lock), or while that
	// cannot be checked; this is checked at every pass, and while local
	// retention renames or removes files tierd holds a shared lock on
	// .lock itself, so that no broker starts meanwhile (see the package
	// doc); it is said in the log, the partitions' status and
	// tierd_copier_log_dir_broker_owned.
	BrokerOwned *bool `yaml:"broker_owned"`
	// FileDeleteDelayMs is how long a local segment renamed to .deleted
	// is kept before it is removed, ms, so open readers finish (Kafka's
	// file.delete.delay.ms). 9223372036854 ms or more (up to
	// 9223372036854775807, Kafka's Long.MAX_VALUE) means forever: the
	// files are kept. Default 60000.
	FileDeleteDelayMs int64 `yaml:"file.delete.delay.ms"`
	// BrokerID is the broker's id (Kafka's broker.id or node.id), recorded
	// in the ownership lease and in every metadata row; each tierd sharing
	// a bucket prefix needs its own. Default -1: unset, which is an error
	// when OwnershipLease is on.
	BrokerID int32 `yaml:"broker_id"`
	// InstanceID identifies this tierd process's state (tierd run keeps it
	// in the metadata dir); it is recorded in the ownership lease and in
	// every row, and tells apart two tierds given one broker_id. Not read
	// from the config file. Default "": required when OwnershipLease is on.
	InstanceID string `yaml:"-"`
	// OwnershipLease lets several tierds, one per broker, share a bucket:
	// a partition is tiered by the tierd that holds its lease (an object
	// in the bucket written only with conditional writes, kept alive by
	// this tierd's instance heartbeat, renewed every third of the lease
	// in one write for all partitions, released on shutdown; see rsm's
	// package doc). Another tierd takes over
	// once the lease is released or has not been renewed for this long.
	// 0 turns leases off (a single tierd per bucket prefix). Default 15m;
	// at least twice copy_timeout. Clocks of the tierds sharing a bucket
	// must agree to well within it.
	OwnershipLease time.Duration `yaml:"ownership_lease"`
	// DeletedRowRetention is how long rows of deleted copies
	// (DELETE_SEGMENT_FINISHED) are kept for inspection. Default 1h.
	DeletedRowRetention time.Duration `yaml:"deleted_row_retention"`
	// CopierThreadPoolSize is how many partitions sync at once, so one
	// slow or stuck partition does not hold up the others (Kafka's
	// remote.log.manager.copier.thread.pool.size). Each copy in flight
	// holds the bucket's upload buffers (part_size x part_concurrency).
	// Default 10.
	CopierThreadPoolSize int `yaml:"remote.log.manager.copier.thread.pool.size"`
	// CopyMaxBytesPerSecond caps the bytes all copies together upload per
	// second (KIP-956's remote.log.manager.copy.max.bytes.per.second),
	// with bursts of a tenth of a second's worth (package quota). Default
	// 9223372036854775807 (Long.MAX_VALUE): no limit.
	CopyMaxBytesPerSecond int64 `yaml:"remote.log.manager.copy.max.bytes.per.second"`
	// IndexIntervalBytes is Kafka's index.interval.bytes, used when a
	// segment's indexes must be rebuilt from its log. Default 4096.
	IndexIntervalBytes int64 `yaml:"index.interval.bytes"`
	// MessageTimestampAfterMaxMs is Kafka's message.timestamp.after.max.ms:
	// a segment whose max timestamp is further ahead of the clock than this
	// is judged for time retention by its file's modification time (local)
	// or its copy time (remote) instead, with a warning, so that one bad
	// timestamp cannot pin a segment forever. Default 3600000 (1 hour).
	MessageTimestampAfterMaxMs int64 `yaml:"message.timestamp.after.max.ms"`
	// RemoteLogDeleteDelayMs is the grace period, ms, between scheduling
	// the deletion of all of a partition's remote copies (its topic was
	// deleted, as the Kafka cluster confirmed, or an operator ordered it)
	// and deleting them; "tierd partitions restore" cancels it meanwhile.
	// Kafka's file.delete.delay.ms idea applied to the remote tier.
	// Default 86400000 (1 day); 0 deletes on the next pass;
	// 9223372036854775807 (Long.MAX_VALUE) and anything past
	// 9223372036854 ms (about 292 years) mean forever: the deletion is
	// scheduled but never comes due, so only an operator can order it.
	RemoteLogDeleteDelayMs int64 `yaml:"remote.log.delete.delay.ms"`
	// ClusterTopicConfigs applies the Kafka cluster's topic configs
	// (retention.ms, retention.bytes, local.retention.ms,
	// local.retention.bytes, remote.storage.enable and the others
	// TopicConfig names, cleanup.policy among them), when a cluster is
	// configured and the value is set rather than Kafka's built-in
	// default, over the retention below. Default true.
	ClusterTopicConfigs bool `yaml:"cluster_topic_configs"`
	// CopyChecksPerPass is how many finished copies each pass checks for
	// missing objects (four small requests each), taken in turn across
	// the partitions this tierd tiers; copies a read found missing are
	// checked on top. Default 4; 0 checks only those.
	CopyChecksPerPass int `yaml:"copy_checks_per_pass"`
	// CopyCheckIntervalMs is the least time, ms, between two rounds of
	// the sampled checks above, so that passes in between (an idle pass
	// among them) make no bucket request for them, whatever the task
	// interval; copies a read found missing are checked at every pass.
	// Default 300000 (5 minutes); 0 checks at every pass.
	CopyCheckIntervalMs int64 `yaml:"copy_check_interval_ms"`
	// Retention is every topic's retention, with Kafka's broker-level
	// names (log.retention.ms, log.retention.bytes,
	// log.local.retention.ms, log.local.retention.bytes; see
	// LogRetention); Topics overrides it per topic.
	Retention topics.LogRetention `yaml:",inline"`
	// RemoteStorageEnable is the default of every topic's
	// remote.storage.enable: true tiers every topic but those that turn
	// it off (opt-out), false only those that turn it on (opt-in), in
	// Topics or, with a cluster, in their topic configs. Kafka's internal
	// topics are never tiered. Default true.
	RemoteStorageEnable bool `yaml:"remote.storage.enable"`
	// LogCleanupPolicy is the default of every topic's cleanup.policy,
	// as Kafka's broker-level log.cleanup.policy: "delete", "compact" or
	// "compact,delete". Default "delete" ("" reads as "delete").
	LogCleanupPolicy string `yaml:"log.cleanup.policy"`
	// RemoteCompaction merges adjacent remote copies of compacted topics
	// (see RemoteCompaction for its settings and their defaults).
	RemoteCompaction RemoteCompaction `yaml:"remote_compaction"`
	// Topics holds per-topic settings with Kafka's topic-level names:
	// retention and tiering (see TopicConfig). Each key is a topic name
	// Kafka takes (Topic.validate: 1 to 249 of [a-zA-Z0-9._-], not "."
	// or "..").
	Topics map[string]topics.TopicConfig `yaml:"topics"`
	// InitialRetentionDelay is how long retention waits on a new
	// metadata dir (see MetadataCreatedMs): until MetadataCreatedMs +
	// InitialRetentionDelay, no local segment and no remote copy is
	// deleted for retention (retention.ms, retention.bytes, the local
	// ones, or below the log start offset), and each pass logs, once per
	// change, what it would delete (partition, tier, offsets, bytes) and
	// shows it in the partition's status, so that a first start over old
	// data (a new tierd, a lost metadata dir) cannot delete it before an
	// operator sees what goes. Superseded copies, failed copy attempts
	// and whole-partition deletions follow their own rules. 0 deletes
	// from the first pass. Default 24h.
	InitialRetentionDelay time.Duration `yaml:"initial_retention_delay"`
	// MetadataCreatedMs is when this tierd's metadata dir was created, ms
	// since the epoch: tierd run keeps it there (tierd-created.json) and
	// gives 0 for a metadata dir older than that record, or one an
	// operator let go ahead (tierd run --retention-go-ahead). Not read
	// from the config file. Default 0: retention does not wait.
	MetadataCreatedMs int64 `yaml:"-"`
	// Source names where this config came from (the file's path), quoted
	// in the proof of deletions a config orders. Not read from the file.
	// Default "" (proofs then say "tierd.yaml").
	Source string `yaml:"-"`
}

// DefaultConfig returns the defaults (no log dirs).
func DefaultConfig() Config {
	return Config{TaskIntervalMs: 30000, CopyTimeout: 5 * time.Minute, FileDeleteDelayMs: 60000, Retention: topics.LogRetention(topics.DefaultRetention()),
		CopierThreadPoolSize: 10, CopyMaxBytesPerSecond: math.MaxInt64, RemoteStorageEnable: true, IndexIntervalBytes: 4096, MessageTimestampAfterMaxMs: 3600000,
		BrokerID: -1, OwnershipLease: 15 * time.Minute, DeletedRowRetention: time.Hour, RemoteLogDeleteDelayMs: 86400000, ClusterTopicConfigs: true,
		CopyChecksPerPass: 4, CopyCheckIntervalMs: 300000, LogCleanupPolicy: "delete", RemoteCompaction: DefaultRemoteCompaction(),
		InitialRetentionDelay: 24 * time.Hour}
}

// Validate reports every problem at once. No log dir is not one of
// them: a copier without log dirs has no local partition of its own
// (tierd run then serves only its other endpoints, and requires
// copier.log_dirs unless the RSM endpoint is on).
func (c Config) Validate() error {
	var errs []error
	if c.TaskIntervalMs < 1 {
		errs = append(errs, fmt.Errorf("copier: remote.log.manager.task.interval.ms %d must be at least 1", c.TaskIntervalMs))
	} else if c.TaskIntervalMs > saturate.MaxMillis {
		errs = append(errs, fmt.Errorf("copier: remote.log.manager.task.interval.ms %d is out of range (at most %d ms, about 292 years)",
			c.TaskIntervalMs, saturate.MaxMillis))
	}
	if c.CopyTimeout <= 0 {
		errs = append(errs, fmt.Errorf("copier: copy_timeout %s must be positive", c.CopyTimeout))
	}
	if c.OwnershipLease > 0 && c.OwnershipLease < 2*c.CopyTimeout {
		errs = append(errs, fmt.Errorf("copier: ownership_lease %s must be at least twice copy_timeout %s (or 0: off)", c.OwnershipLease, c.CopyTimeout))
	}
	if c.OwnershipLease > 0 && c.BrokerID == -1 && len(c.LogDirs) > 0 {
		errs = append(errs, errors.New("copier: broker_id is required with ownership_lease: set it to this broker's id (broker.id or node.id), "+
			"one per tierd sharing the bucket prefix; or set ownership_lease: 0 if this tierd alone writes the prefix"))
	}
	if c.BrokerID < -1 {
		errs = append(errs, fmt.Errorf("copier: broker_id %d must not be negative", c.BrokerID))
	}
	if c.OwnershipLease < 0 || c.DeletedRowRetention < 0 {
		errs = append(errs, fmt.Errorf("copier: ownership_lease %s and deleted_row_retention %s must not be negative", c.OwnershipLease, c.DeletedRowRetention))
	}
	if c.CopierThreadPoolSize < 1 || c.CopierThreadPoolSize > MaxCopierThreadPoolSize {
		errs = append(errs, fmt.Errorf("copier: remote.log.manager.copier.thread.pool.size %d is out of range (from 1 to %d partitions syncing at once)",
			c.CopierThreadPoolSize, MaxCopierThreadPoolSize))
	}
	if c.CopyMaxBytesPerSecond < 1 {
		errs = append(errs, fmt.Errorf("copier: remote.log.manager.copy.max.bytes.per.second %d must be at least 1 (9223372036854775807: no limit)", c.CopyMaxBytesPerSecond))
	}
	if c.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("copier: index.interval.bytes %d must not be negative", c.IndexIntervalBytes))
	}
	if c.MessageTimestampAfterMaxMs < 0 {
		errs = append(errs, fmt.Errorf("copier: message.timestamp.after.max.ms %d must not be negative", c.MessageTimestampAfterMaxMs))
	}
	if c.CopyChecksPerPass < 0 || c.CopyChecksPerPass > MaxCopyChecksPerPass {
		errs = append(errs, fmt.Errorf("copier: copy_checks_per_pass %d is out of range (from 0 to %d copies a pass)", c.CopyChecksPerPass, MaxCopyChecksPerPass))
	}
	if c.CopyCheckIntervalMs < 0 {
		errs = append(errs, fmt.Errorf("copier: copy_check_interval_ms %d must not be negative (0 checks at every pass)", c.CopyCheckIntervalMs))
	}
	if c.RemoteLogDeleteDelayMs < 0 {
		errs = append(errs, fmt.Errorf("copier: remote.log.delete.delay.ms %d must not be negative", c.RemoteLogDeleteDelayMs))
	}
	if c.InitialRetentionDelay < 0 {
		errs = append(errs, fmt.Errorf("copier: initial_retention_delay %s must not be negative (0: no wait)", c.InitialRetentionDelay))
	}
	if c.FileDeleteDelayMs < 0 {
		errs = append(errs, fmt.Errorf("copier: file.delete.delay.ms %d must not be negative", c.FileDeleteDelayMs))
	}
	errs = append(errs, topics.Retention(c.Retention).Validate("copier: ", "log.")...)
	if c.LogCleanupPolicy != "" {
		if _, err := topics.ParseCleanupPolicy(c.LogCleanupPolicy); err != nil {
			errs = append(errs, fmt.Errorf("copier: log.cleanup.policy: %w", err))
		}
	}
	errs = append(errs, c.RemoteCompaction.validate()...)
	for topic, tc := range c.Topics {
		if err := kafkalog.ValidateTopicName(topic); err != nil {
			errs = append(errs, fmt.Errorf("copier: topics: %q: %w (Kafka's rule for topic names)", topic, err))
			continue
		}
		errs = append(errs, tc.Validate(fmt.Sprintf("copier: topics: %s: ", topic))...)
	}
	return errors.Join(errs...)
}

// Bounds of the settings that size goroutine pools and allocations: a
// value past them is refused by Validate rather than tried.
const (
	// MaxCopierThreadPoolSize caps remote.log.manager.copier.thread.pool.size.
	MaxCopierThreadPoolSize = 1024
	// MaxCopyChecksPerPass caps copy_checks_per_pass.
	MaxCopyChecksPerPass = 100000
)

// Interval is TaskIntervalMs as a duration, saturating (see
// saturate.Millis) and at least 1 ms, so a config that skipped Validate
// still gives a timer a positive interval.
func (c Config) Interval() time.Duration {
	return max(saturate.Millis(c.TaskIntervalMs), time.Millisecond)
}

// FileDeleteDelay is FileDeleteDelayMs as a duration, saturating:
// saturate.Forever for 9223372036854 ms or more.
func (c Config) FileDeleteDelay() time.Duration { return saturate.Millis(c.FileDeleteDelayMs) }

// RemoteLogDeleteDelay is RemoteLogDeleteDelayMs as a duration,
// saturating: saturate.Forever for 9223372036854 ms or more.
func (c Config) RemoteLogDeleteDelay() time.Duration {
	return saturate.Millis(c.RemoteLogDeleteDelayMs)
}

// deleteDueMs is when a deletion scheduled at nowMs comes due, ms since
// the epoch: nowMs + RemoteLogDeleteDelayMs without wrapping, so Kafka's
// Long.MAX_VALUE gives math.MaxInt64, which is never due.
func (c Config) deleteDueMs(nowMs int64) int64 {
	if c.RemoteLogDeleteDelayMs >= saturate.MaxMillis {
		return math.MaxInt64
	}
	return saturate.Add(nowMs, c.RemoteLogDeleteDelayMs)
}

// TopicDefaults are the settings every topic takes from this config,
// under its own entry in Topics: see topics.Resolve.
func (c Config) TopicDefaults() topics.Defaults {
	return topics.Defaults{Retention: c.Retention, RemoteStorageEnable: c.RemoteStorageEnable, LogCleanupPolicy: c.LogCleanupPolicy,
		Compaction: c.RemoteCompaction.compaction(), ClusterTopicConfigs: c.ClusterTopicConfigs}
}

// resolve resolves a topic's settings from this config and the cluster's
// topic configs (nil: none).
func (c Config) resolve(topic string, configs map[string]cluster.ConfigValue) topics.Settings {
	return topics.Resolve(topic, c.TopicDefaults(), c.Topics[topic], configs)
}
