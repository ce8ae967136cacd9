package copier

import (
	"errors"
	"fmt"
	"time"
)

// Retention holds a topic's retention settings with Kafka's names; nil
// means "not set here" (inherit). Times are ms, sizes bytes.
//
//   - retention.ms: remote and local data older than this goes. Default
//     604800000 (7 days); -1 unlimited.
//   - retention.bytes: the whole log (local + remote, each offset counted
//     once) is kept within this size. Default -1 (unlimited).
//   - local.retention.ms / local.retention.bytes: the same for the local
//     copy of tiered segments. Default -2: "same as the total setting";
//     -1 unlimited. A local value larger than the total one is clamped to
//     the total (with a warning), as Kafka does.
type Retention struct {
	RetentionMs         *int64 `yaml:"retention.ms"`
	RetentionBytes      *int64 `yaml:"retention.bytes"`
	LocalRetentionMs    *int64 `yaml:"local.retention.ms"`
	LocalRetentionBytes *int64 `yaml:"local.retention.bytes"`
}

// Limits are resolved retention settings of one topic: -1 is unlimited.
type Limits struct {
	RetentionMs, RetentionBytes           int64
	LocalRetentionMs, LocalRetentionBytes int64
}

// DefaultRetention returns Kafka's defaults.
func DefaultRetention() Retention {
	ms, bytes, local := int64(7*24*3600*1000), int64(-1), int64(-2)
	return Retention{RetentionMs: &ms, RetentionBytes: &bytes, LocalRetentionMs: &local, LocalRetentionBytes: &local}
}

// over returns r with the fields set in o replacing its own.
func (r Retention) over(o Retention) Retention {
	for _, f := range []struct{ dst, src **int64 }{
		{&r.RetentionMs, &o.RetentionMs}, {&r.RetentionBytes, &o.RetentionBytes},
		{&r.LocalRetentionMs, &o.LocalRetentionMs}, {&r.LocalRetentionBytes, &o.LocalRetentionBytes},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
	return r
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

func (r Retention) validate(where string) []error {
	var errs []error
	for name, p := range map[string]*int64{"retention.ms": r.RetentionMs, "retention.bytes": r.RetentionBytes} {
		if p != nil && *p < -1 {
			errs = append(errs, fmt.Errorf("%s%s %d: must be -1 or more", where, name, *p))
		}
	}
	for name, p := range map[string]*int64{"local.retention.ms": r.LocalRetentionMs, "local.retention.bytes": r.LocalRetentionBytes} {
		if p != nil && *p < -2 {
			errs = append(errs, fmt.Errorf("%s%s %d: must be -2 or more", where, name, *p))
		}
	}
	return errs
}

// Config configures the copier. Defaults are in DefaultConfig.
type Config struct {
	// LogDirs are Kafka log directories holding "<topic>-<partition>"
	// partition directories. Required.
	LogDirs []string `yaml:"log_dirs"`
	// Interval is the time between sync passes. Default 10s.
	Interval time.Duration `yaml:"interval"`
	// CopyTimeout bounds one segment copy. Default 5m.
	CopyTimeout time.Duration `yaml:"copy_timeout"`
	// BrokerOwned turns local deletion off, for log dirs a running broker
	// owns (its own retention trims local disk). tierd then only copies,
	// and reports segments that vanished before their copy as gaps.
	// Default false.
	BrokerOwned bool `yaml:"broker_owned"`
	// FileDeleteDelay is how long a local segment renamed to .deleted is
	// kept before it is removed, so open readers finish (Kafka's
	// file.delete.delay.ms). Default 60s.
	FileDeleteDelay time.Duration `yaml:"file_delete_delay"`
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
	// in the bucket written only with conditional writes, renewed every
	// third of the lease, released on shutdown). Another tierd takes over
	// once the lease is released or has not been renewed for this long.
	// 0 turns leases off (a single tierd per bucket prefix). Default 15m;
	// at least twice copy_timeout. Clocks of the tierds sharing a bucket
	// must agree to well within it.
	OwnershipLease time.Duration `yaml:"ownership_lease"`
	// DeletedRowRetention is how long rows of deleted copies
	// (DELETE_SEGMENT_FINISHED) are kept for inspection. Default 1h.
	DeletedRowRetention time.Duration `yaml:"deleted_row_retention"`
	// Concurrency is how many partitions sync at once, so one slow or
	// stuck partition does not hold up the others. Default 4.
	Concurrency int `yaml:"copy_concurrency"`
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
	// Default 86400000 (1 day); 0 deletes on the next pass.
	RemoteLogDeleteDelayMs int64 `yaml:"remote.log.delete.delay.ms"`
	// ClusterTopicConfigs applies the Kafka cluster's topic configs
	// (retention.ms, retention.bytes, local.retention.ms,
	// local.retention.bytes, remote.storage.enable), when a cluster is
	// configured and the value is set rather than Kafka's built-in
	// default, over the retention below. Default true.
	ClusterTopicConfigs bool `yaml:"cluster_topic_configs"`
	// CopyChecksPerPass is how many finished copies each pass checks for
	// missing objects (four small requests each), taken in turn across
	// the partitions this tierd tiers; copies a read found missing are
	// checked on top. Default 4; 0 checks only those.
	CopyChecksPerPass int `yaml:"copy_checks_per_pass"`
	// Retention applies to every topic; Topics overrides it per topic.
	Retention Retention            `yaml:"retention"`
	Topics    map[string]Retention `yaml:"topics"`
}

// DefaultConfig returns the defaults (no log dirs).
func DefaultConfig() Config {
	return Config{Interval: 10 * time.Second, CopyTimeout: 5 * time.Minute, FileDeleteDelay: time.Minute, Retention: DefaultRetention(),
		Concurrency: 4, IndexIntervalBytes: 4096, MessageTimestampAfterMaxMs: 3600000,
		BrokerID: -1, OwnershipLease: 15 * time.Minute, DeletedRowRetention: time.Hour, RemoteLogDeleteDelayMs: 86400000, ClusterTopicConfigs: true,
		CopyChecksPerPass: 4}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if len(c.LogDirs) == 0 {
		errs = append(errs, errors.New("copier: log_dirs is required"))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("copier: interval %s must be positive", c.Interval))
	}
	if c.CopyTimeout <= 0 {
		errs = append(errs, fmt.Errorf("copier: copy_timeout %s must be positive", c.CopyTimeout))
	}
	if c.OwnershipLease > 0 && c.OwnershipLease < 2*c.CopyTimeout {
		errs = append(errs, fmt.Errorf("copier: ownership_lease %s must be at least twice copy_timeout %s (or 0: off)", c.OwnershipLease, c.CopyTimeout))
	}
	if c.OwnershipLease > 0 && c.BrokerID == -1 {
		errs = append(errs, errors.New("copier: broker_id is required with ownership_lease: set it to this broker's id (broker.id or node.id), "+
			"one per tierd sharing the bucket prefix; or set ownership_lease: 0 if this tierd alone writes the prefix"))
	}
	if c.BrokerID < -1 {
		errs = append(errs, fmt.Errorf("copier: broker_id %d must not be negative", c.BrokerID))
	}
	if c.OwnershipLease < 0 || c.DeletedRowRetention < 0 {
		errs = append(errs, fmt.Errorf("copier: ownership_lease %s and deleted_row_retention %s must not be negative", c.OwnershipLease, c.DeletedRowRetention))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("copier: copy_concurrency %d must be at least 1", c.Concurrency))
	}
	if c.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("copier: index.interval.bytes %d must not be negative", c.IndexIntervalBytes))
	}
	if c.MessageTimestampAfterMaxMs < 0 {
		errs = append(errs, fmt.Errorf("copier: message.timestamp.after.max.ms %d must not be negative", c.MessageTimestampAfterMaxMs))
	}
	if c.CopyChecksPerPass < 0 {
		errs = append(errs, fmt.Errorf("copier: copy_checks_per_pass %d must not be negative", c.CopyChecksPerPass))
	}
	if c.RemoteLogDeleteDelayMs < 0 {
		errs = append(errs, fmt.Errorf("copier: remote.log.delete.delay.ms %d must not be negative", c.RemoteLogDeleteDelayMs))
	}
	if c.FileDeleteDelay < 0 {
		errs = append(errs, fmt.Errorf("copier: file_delete_delay %s must not be negative", c.FileDeleteDelay))
	}
	errs = append(errs, c.Retention.validate("copier: retention: ")...)
	for topic, r := range c.Topics {
		errs = append(errs, r.validate(fmt.Sprintf("copier: topics: %s: ", topic))...)
	}
	return errors.Join(errs...)
}

// RemoteLogDeleteDelay is RemoteLogDeleteDelayMs as a duration.
func (c Config) RemoteLogDeleteDelay() time.Duration {
	return time.Duration(c.RemoteLogDeleteDelayMs) * time.Millisecond
}

// LimitsFor resolves the retention of one topic from this config alone.
func (c Config) LimitsFor(topic string) (Limits, []string) {
	return c.retention(topic).resolve()
}

// retention is a topic's settings from this config: Kafka's defaults,
// then Retention, then the topic's entry in Topics.
func (c Config) retention(topic string) Retention {
	r := DefaultRetention().over(c.Retention)
	if o, ok := c.Topics[topic]; ok {
		r = r.over(o)
	}
	return r
}
