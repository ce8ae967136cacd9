// Package cluster gives tierd the facts only the Kafka cluster knows:
// which topics exist under which topic ids, who leads each partition and
// under which leader epoch, and the topics' retention configs. A sidecar
// sees one broker's disk; a `-delete` directory or a changed
// partition.metadata there has several explanations, so decisions that
// delete the remote tier (maybe the only copy) ask the cluster instead.
//
// The client is franz-go's kgo (the client kadm wraps), configured from
// Config (bootstrap servers, SASL PLAIN or SCRAM, TLS). The package sends
// kmsg requests through kgo itself rather than through kadm's helpers for
// two reasons read in kadm v1.20.0: kadm.Client.Metadata answers from
// kgo's metadata cache (up to MetadataMinAge, 5s, old) and does not say
// which broker answered, and kadm.Client.DescribeTopicConfigs fails the
// whole call when one topic is not authorized. Nothing here encodes the
// protocol by hand. The tests drive the cluster through kadm, as an
// operator's tools would.
//
// # Kafka messages used
//
//   - Metadata (key 3), all topics (null topic list), at the highest
//     version both sides support (v13 with franz-go's kmsg v1.15.1): the
//     brokers, the controller, the cluster id (v2+), each topic's id
//     (v10+) and each partition's leader, leader epoch (v7+), replicas and
//     ISR. This is Client.Describe; one broker answers from its metadata
//     cache, and View.Source names it.
//   - Metadata naming topics by id and no name (KIP-516; ids accepted in
//     requests from v12): Client.TopicIDs.
//   - DescribeConfigs (key 32, v0-v4; v4 with kmsg v1.15.1) for the topic
//     resources asked for, with ConfigNames set to TopicConfigKeys, so a
//     broker returns only those keys it knows (ConfigHelper.describeConfigs
//     filters by the keys asked for; local.retention.* and
//     remote.storage.enable exist from Kafka 3.6 on).
//   - DescribeAcls (key 29, v0-v3) with a filter that matches every ACL
//     (ANY types, null name, principal and host): Client.ACLs, for the
//     endpoints that apply the cluster's ACLs (internal/kafkaacl). Kafka
//     answers it only to a principal with DESCRIBE on the Cluster
//     resource; v0 knows no pattern types (every ACL literal). Sent as a
//     kmsg request through kgo, like the others, so that the answering
//     broker is named and kadm's fan-out of one request per filter is
//     not needed.
//
// # How a broker answers Metadata by topic id
//
// Read in apache/kafka (trunk of October 2024, commit 1eb7644349cb),
// core/src/main/scala/kafka/server/KafkaApis.scala,
// handleTopicMetadataRequest:
//
//   - In v10 and v11 a topic id or a null name in the request is an
//     InvalidRequestException: ids are answered from v12 only (the comment
//     in clients/src/main/resources/common/message/MetadataRequest.json
//     says the same). TopicIDs therefore trusts no answer below v12.
//   - Ids the broker's metadata cache does not know
//     (MetadataCache.getTopicName is empty; in KRaft, KRaftMetadataCache
//     looks the id up in the current metadata image) are answered with
//     UNKNOWN_TOPIC_ID (error code 100), a null name and the id. This
//     happens before and regardless of authorization: topic ids are not
//     treated as secret.
//   - Known ids whose topic the principal may not DESCRIBE are answered
//     with TOPIC_AUTHORIZATION_FAILED (29), a null name and the id.
//   - Known, authorized ids get the full topic: name, partitions, no error.
//   - An all-topics request silently leaves out every topic the principal
//     may not DESCRIBE, so a topic's absence from a listing (View) is not
//     evidence that it was deleted.
//
// # Proof rules (TopicIDs)
//
// An id is IDGone only when all of these hold for one answer:
//
//   - the request named the id (not a name) and was sent as Metadata v12
//     or later;
//   - the answer carries a cluster id, equal to Config.ClusterID when that
//     is set and to the call's first answer otherwise (the caller should
//     also compare the returned cluster id with the one it knows, e.g.
//     cluster.id in the log dir's meta.properties);
//   - the answer has no top-level error (v13) and lists at least one live
//     broker (a broker whose metadata is not loaded lists none);
//   - the answer's entry for the id has error code UNKNOWN_TOPIC_ID.
//
// An entry with no error and a name is IDExists. Everything else is
// IDUnknown and proves nothing: TOPIC_AUTHORIZATION_FAILED, any other
// error code, a transport error or timeout, an answer that leaves the id
// out, an answer from another cluster. IDStatus.Proof records request,
// version, broker, cluster id, error code and time, for the journal.
//
// One answer is one broker's metadata cache at one moment. A broker that
// lags the controller could miss a topic created moments ago, which is
// never the case for an id found in a partition's partition.metadata on
// disk well before; the caller's grace period before deleting, with a
// second TopicIDs just before the delete, is the guard against a
// momentary wrong answer.
//
// # franz-go's kfake (the tests' cluster)
//
// kfake (pkg/kfake at v0.0.0-20260918054303-01f206a7e32c, 03_metadata.go)
// answers Metadata by id as Kafka does in the cases that decide: an
// unknown id gets UNKNOWN_TOPIC_ID before any ACL check, an unauthorized
// known id gets TOPIC_AUTHORIZATION_FAILED. It differs in two ways: it
// accepts ids from v10 (Kafka from v12), and it puts the topic's name in a
// TOPIC_AUTHORIZATION_FAILED entry (Kafka sends null). It also answers
// several unknown ids of one request with a single entry (it indexes its
// answer by topic name, which is "" for all of them), which is why
// TopicIDs asks again, alone, about ids an answer left out. kfake does not
// know local.retention.ms, local.retention.bytes or remote.storage.enable;
// the tests inject a DescribeConfigs answer carrying them.
package cluster
