// Package topics resolves the settings a copier pass applies to one
// topic, purely: from tierd.yaml's copier defaults (Defaults, which
// copier.Config.TopicDefaults builds), the topic's entry under
// copier.topics (TopicConfig) and the Kafka cluster's topic configs
// (map[string]cluster.ConfigValue, as cluster.Describe reads them), with
// no clock, store, bucket or logger. Resolve gives Settings: the
// retention limits (Limits, ms and bytes, with Kafka's clamp applied and
// its warnings), the tiering policy (Tiering), the cleanup.policy
// (CleanupPolicy), the remote compaction settings (Compaction), and
// where each of them came from (Settings.From, by Kafka's topic config
// name). Settings.Explain lists them as "tierd config show" prints them,
// so that the command and a pass, which both call Resolve, cannot
// disagree. The copier adds what is not pure: which cluster view is fresh
// enough to use, and logging each override by the cluster once.
//
// # Order of precedence
//
// Each setting on its own, the later winning:
//
//	Kafka's default                  retention.ms 604800000, retention.bytes -1,
//	                                 local.retention.* -2, cleanup.policy delete,
//	                                 remote.log.copy.disable and
//	                                 remote.log.delete.on.disable false
//	< copier.log.* and the copier's  log.retention.ms, log.local.retention.bytes, ...,
//	  defaults                       log.cleanup.policy, remote.storage.enable,
//	                                 remote_compaction.segment.bytes, ...
//	< copier.topics.<topic>          the topic's entry, with Kafka's topic-level names
//	< the cluster's topic config     when copier.cluster_topic_configs is on and the
//	                                 value is set other than by Kafka's built-in default
//	                                 (source DEFAULT_CONFIG, or IsDefault): a
//	                                 DYNAMIC_TOPIC_CONFIG, or a broker-level
//	                                 DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG
//	                                 or STATIC_BROKER_CONFIG, which Kafka applies to the
//	                                 topic too
//
// A cluster value that does not parse (or, for remote compaction, is out
// of Kafka's range) is ignored: the layer below stands. A bad value in
// tierd.yaml is refused when the config loads (TopicConfig.Validate,
// Retention.Validate, Compaction.Validate), not here.
//
// # Kafka's rules
//
//   - remote.storage.enable (KIP-405) turns tiering of the topic on; off,
//     the topic is left alone (no copy, no retention) and its copies stay
//     readable.
//   - remote.log.delete.on.disable (KIP-950): with remote.storage.enable
//     off, the topic's remote copies are to be deleted
//     (Tiering.DeletesRemote).
//   - remote.log.copy.disable (KIP-950): copying stops, remote retention
//     goes on, and local.retention.* no longer applies: the local limits
//     are retention.ms and retention.bytes (Resolve applies it to
//     Settings.Limits).
//   - local.retention.ms and local.retention.bytes are clamped to
//     retention.ms and retention.bytes as Kafka's LogConfig does: -2
//     means the total value, and a local value larger than a limited
//     total (-1, unlimited, among them) takes the total, with a warning.
//   - cleanup.policy is Kafka's list of delete and compact
//     (ParseCleanupPolicy); with compact and without delete,
//     retention.ms/bytes delete no remote copy.
package topics
