// Package listener is tierd's read-only Kafka protocol listener: a TCP
// server that speaks the Kafka wire protocol and answers from a Log, so any
// Kafka consumer (franz-go, librdkafka and kcat, sarama, kafka-python, the
// Java client) reads the whole history of a partition, tiered and local,
// from tierd. tierd presents itself as a one-broker cluster (node id
// tierd's broker_id) that leads every partition its Log serves.
//
// Every request and response is decoded and encoded by franz-go's kmsg;
// the package itself frames requests (a 4-byte size), reads the request
// header (v1, or v2 with tagged fields for flexible versions) and writes
// the response header (v0, or v1 for flexible versions except ApiVersions,
// which is always v0, KIP-511).
//
// # APIs served
//
// ApiVersions advertises exactly these; each handler's doc comment lists
// its behavior in full.
//
//	API                   versions  Kafka semantics kept
//	ApiVersions (18)      0-4       all served APIs; a higher version gets a
//	                                v0 UNSUPPORTED_VERSION answer with the
//	                                ApiVersions range (KIP-511)
//	Metadata (3)          0-12      one broker, leader of every held
//	                                partition; partitions 0..highest held
//	                                (at most 99999), holes
//	                                LEADER_NOT_AVAILABLE; topic ids
//	                                (v10+), lookup by id (v12); internal
//	                                topics flagged; no auto creation
//	ListOffsets (2)       0-9       every special timestamp and timestamp
//	                                lookup as Kafka answers it, bounded by
//	                                the isolation level's end; leader
//	                                epochs (v4+) from the lineage trimmed
//	                                to the log start (see "Offsets")
//	Fetch (1)             4-16      records byte for byte; max_bytes (capped
//	                                by fetch.max.bytes), partition_max_bytes,
//	                                at least one batch; min_bytes/max_wait_ms
//	                                long polling; read_committed aborted
//	                                transactions; no sessions (id 0); topic
//	                                ids (v13+)
//	OffsetForLeaderEpoch  0-4       LeaderEpochFileCache.endOffsetFor over
//	(23)                            the lineage trimmed to the log start,
//	                                the high watermark as the log end (see
//	                                "Offsets")
//	SaslHandshake (17)    0-1       with sasl.enabled.mechanisms only (see
//	SaslAuthenticate (36) 0-2       "Authentication")
//	Produce (0)           3-13      advertised for librdkafka's feature
//	                                detection, never written: every
//	                                partition TOPIC_AUTHORIZATION_FAILED;
//	                                acks=0 gets no response
//
// With a group coordinator (WithGroups; kafka.group.coordinator.enable in
// tierd), the classic group protocol too, answered by package
// listener/groups (its doc.go has the rules):
//
//	API                   versions  Kafka semantics kept
//	FindCoordinator (10)  0-4       this listener's broker for a group
//	                                (DESCRIBE on it); transactions
//	                                COORDINATOR_NOT_AVAILABLE; batched
//	                                keys (v4)
//	JoinGroup (11)        0-9       waits for the join phase; KIP-394
//	                                member ids (v4+), static members
//	                                (v5+, KIP-345), skip_assignment (v9)
//	SyncGroup (14)        0-5       waits for the leader's assignment
//	Heartbeat (12)        0-4       session kept; REBALANCE_IN_PROGRESS
//	LeaveGroup (13)       0-5       batched members (v3+)
//	OffsetCommit (8)      0-8       durable before the answer; simple
//	                                commits to Empty groups; the
//	                                partition must be served
//	OffsetFetch (9)       0-8       one group (v0-7) or several (v8);
//	                                every topic when none is named (v2+)
//	ListGroups (16)       0-5       state (v4+) and type (v5+) filters
//	DescribeGroups (15)   0-5       members with metadata and assignment;
//	                                authorized operations (v3+)
//	DeleteGroups (42)     0-2       Empty groups only (NON_EMPTY_GROUP)
//	OffsetDelete (47)     0         not for subscribed topics
//
// The group APIs check Kafka's GROUP ACLs as its KafkaApis does: READ to
// join, sync, heartbeat, leave and commit; DESCRIBE (implied by READ) to
// find the coordinator, fetch offsets and describe; DELETE to delete
// groups and offsets; ListGroups lists every group with DESCRIBE on the
// cluster, otherwise those the caller may describe. A commit also needs
// READ on each topic, an offset fetch DESCRIBE (topics without it are
// TOPIC_AUTHORIZATION_FAILED when named, left out when all are asked).
// KIP-848's ConsumerGroupHeartbeat is not advertised: clients that prefer
// it use the classic protocol.
//
// WithGroupForwarding serves the same APIs by relaying them to the Kafka
// cluster's coordinators (groupforward.go): the ACL checks above first,
// then the request at the newest version both sides support up to the
// ones above, and the answer back in the client's version (a JoinGroup
// below v4 gets its member id without a KIP-394 round; a LeaveGroup below
// v3 and an OffsetFetch below v8 travel in their batched forms).
//
// A request for any other API key or version closes the connection (Kafka
// closes a connection whose request it cannot parse), is logged once per
// client (remote host and client id) with the API and version, and counted
// (tierd_kafka_connections_closed_total{reason="unsupported_request"}).
// Without a group coordinator the group APIs are among them: consumers
// use assign-style consumption (franz-go ConsumePartitions, librdkafka
// assign, sarama ConsumePartition).
//
// # Offsets
//
// ListOffsets and OffsetForLeaderEpoch answer as a Kafka broker does once
// retention, delete-records or local retention moved the log start
// offsets. The lineage is the Log's leader-epoch lineage trimmed to the
// log start offset as the broker's cache is trimmed when its log start
// moves (LeaderEpochFileCache.truncateFromStart, from
// UnifiedLog.maybeIncrementLogStartOffset): entries starting at or below
// the log start are dropped and the last of them starts at it. "Epoch at
// o" is LeaderEpochFileCache.epochForOffset(o) over that lineage (-1 when
// it starts after o). The end is the high watermark, or the last stable
// offset under read_committed (consumers, replica id -1), as
// Partition.fetchOffsetForTimestamp's lastFetchableOffset; a bounded
// answer at or past it is offset -1, timestamp -1, epoch -1, no error
// (ReplicaManager.fetchOffset).
//
//	ListOffsets           answer (offset, epoch v4+)  bounded  Kafka source
//	LATEST -1             end, latest lineage epoch   no       Partition.fetchOffsetForTimestamp
//	EARLIEST -2           log start, epoch at it      no       UnifiedLog.fetchOffsetByTimestamp
//	                                                           (earliest entry when it starts
//	                                                           at or below the log start)
//	MAX_TIMESTAMP -3      first record with the       yes      UnifiedLog.fetchOffsetByTimestamp,
//	(v7+)                 largest timestamp, log               ReplicaManager.fetchOffset
//	                      start to high watermark;
//	                      its timestamp; epoch at it
//	EARLIEST_LOCAL -4     local log start, never      no       UnifiedLog.fetchOffsetByTimestamp,
//	(v8+)                 below the log start;                 maybeIncrementLogStartOffset
//	                      epoch at it
//	LATEST_TIERED -5      highest tiered offset and   yes      UnifiedLog.fetchOffsetByTimestamp
//	(v9+)                 epoch at it; -1, epoch -1            (highestOffsetInRemoteStorage)
//	                      when nothing is tiered
//	timestamp >= 0        first record at or after    yes      UnifiedLog.fetchOffsetByTimestamp,
//	                      the log start whose                  RemoteLogManager.findOffsetByTimestamp,
//	                      timestamp reaches it (by             FileRecords.searchForTimestamp
//	                      offset, not the closest);
//	                      its timestamp; epoch at it
//	other negative, or    UNSUPPORTED_VERSION         -        ReplicaManager
//	below the version                                          isListOffsetsTimestampUnsupported
//	v0: not -1 or -2      UNSUPPORTED_VERSION         -        KafkaApis.handleListOffsetRequestV0
//	a partition twice     INVALID_REQUEST (v1+)       -        ReplicaManager.fetchOffset
//	current epoch (v4+)   FENCED_LEADER_EPOCH /       -        Partition.localLogWithEpochOrThrow
//	older / newer         UNKNOWN_LEADER_EPOCH
//
//	OffsetForLeaderEpoch  answer (epoch, end offset)           Kafka source
//	-1 (UNDEFINED)        -1, -1                               LeaderEpochFileCache.endOffsetFor
//	the latest epoch      it, high watermark                   endOffsetFor (tierd: the high
//	                                                           watermark as the log end offset)
//	inside the lineage    largest epoch at or below it,        endOffsetFor
//	                      start of the next epoch
//	below the lineage     it, the first entry's start: the     endOffsetFor after
//	(trimmed away)        log start when the lineage began     truncateFromStart
//	                      before it
//	above the latest,     -1, -1 (no error)                    endOffsetFor,
//	empty lineage                                              UnifiedLog.endOffsetForEpoch
//	current epoch (v2+)   FENCED_LEADER_EPOCH /                Partition.lastOffsetForLeaderEpoch
//	older / newer         UNKNOWN_LEADER_EPOCH
//
// tierd differs from Kafka (4.0.0-SNAPSHOT, October 2024) only where
// Kafka's answer is an artifact of its segment files: its MAX_TIMESTAMP
// looks at local segments only (the open fix, KAFKA-17552, looks at both
// tiers, as tierd does) and counts records below the log start still in a
// segment file, and its timestamp lookup gives up, rather than moving to
// the next segment, when the first segment reaching the timestamp holds
// no such record at or after the log start; tierd answers from the
// records at or after the log start. The epoch Kafka gives for
// MAX_TIMESTAMP and timestamps is the found batch's partitionLeaderEpoch,
// which is the lineage's epoch at its offset in a log whose lineage
// matches its batches, as tierd assumes. Kafka bounds non-consumer
// requests by the log end offset; tierd serves nothing past the high
// watermark.
//
// # Error mapping
//
// The Log's error classes become Kafka error codes here and nowhere else
// (errorCode):
//
//	Log error                  Kafka code                    client reaction
//	ErrUnknownPartition        UNKNOWN_TOPIC_OR_PARTITION 3  metadata refresh, retry
//	*OffsetOutOfRangeError     OFFSET_OUT_OF_RANGE 1         (Fetch) offset reset per
//	                           with log start offset and     the client's policy
//	                           high watermark
//	ErrUnavailable, I/O errors KAFKA_STORAGE_ERROR 56        retry (retriable)
//	                           (Fetch v4-v5:
//	                           NOT_LEADER_OR_FOLLOWER 6, as
//	                           Kafka down-converts it)
//	ErrDataLoss                UNKNOWN_SERVER_ERROR -1       reported to the
//	                                                         application (not
//	                                                         retriable)
//	current epoch older        FENCED_LEADER_EPOCH 74        metadata refresh
//	current epoch newer        UNKNOWN_LEADER_EPOCH 75       retry
//
// tierd's own failures (storage, data loss) are logged once per partition
// and code. A Log that cannot list its topics closes the Metadata request's
// connection (no Metadata version before v13 can carry an error).
//
// # Authentication
//
// With Config.SASLEnabledMechanisms set (and WithSASL's credentials,
// package sasl), the listener is SASL_PLAINTEXT, or SASL_SSL over TLS, as
// a Kafka broker's SASL listener is: before a client has logged in it
// answers ApiVersions (which then lists SaslHandshake v0-1 and
// SaslAuthenticate v0-2), SaslHandshake and SaslAuthenticate only, and
// closes the connection on anything else; frames before login are
// bounded by sasl.server.max.receive.size, and the login by
// sasl.authentication.timeout.ms. SaslHandshake v0 is followed by raw,
// size-prefixed SASL tokens (KIP-43), v1 by SaslAuthenticate requests
// (KIP-152). A mechanism not enabled is answered
// UNSUPPORTED_SASL_MECHANISM with the enabled ones, a failed login
// SASL_AUTHENTICATION_FAILED with Kafka's sentence, each after
// connection.failed.authentication.delay.ms (times the address's
// failures in the minute since its first counted one, up to 50), and the connection is closed;
// a client address has at most sasl.max.inflight.logins.per.ip SASL steps
// running at once (a PLAIN step hashes the password), a login past it
// failing at once.
// With connections.max.reauth.ms a login lasts that long (KIP-368: told
// to the client in SaslAuthenticate v1+, which logs in again with
// SaslHandshake v1 on the same connection, as the same principal); a
// request after it closes the connection. The principal is "User:" and
// the SASL user name.
//
// # Authorization
//
// With an Authorizer (WithAuthorizer; tierd's authz, Kafka's ACLs), every
// request is authorized as a Kafka broker authorizes a consumer's
// (KafkaApis): Metadata lists only the topics the client may DESCRIBE,
// and a topic named that it may not describe is answered
// TOPIC_AUTHORIZATION_FAILED with no partitions, whether it exists or
// not (by topic id: a known id gets the error and no name); ListOffsets
// and OffsetForLeaderEpoch need DESCRIBE, Fetch needs READ, each answered
// TOPIC_AUTHORIZATION_FAILED per partition when denied; Metadata's
// authorized operations (v8+) are, of READ and DESCRIBE, those the ACLs
// allow (DESCRIBE on the cluster for the cluster's). The principal is the
// SASL login's, else User:ANONYMOUS on plaintext and on TLS without a client certificate,
// and "User:" and the subject's distinguished name (RFC 2253) of a
// verified client certificate, mapped by ssl.principal.mapping.rules
// (Kafka's syntax; a certificate no rule applies to is refused); the host is the client's address as
// Kafka's ACLs compare it (internal/kafkaacl.HostString). A denial is
// logged once per client and topic, with the principal and the rule.
// Without an Authorizer every client may describe and read every topic
// served.
//
// KRaft's metadata log, __cluster_metadata (the cluster's configuration
// and SCRAM credential records), is never served, whatever the ACLs: it
// is left out of Metadata and answered UNKNOWN_TOPIC_OR_PARTITION (by
// topic id, UNKNOWN_TOPIC_ID), as if it did not exist, as a broker
// serves it to no client.
//
// # Limits
//
//   - A frame's size is checked against socket.request.max.bytes before
//     anything is allocated for it, and the body buffer then grows with the
//     bytes that actually arrive (never more than twice them); kmsg bounds
//     every array by the bytes left in the frame. A size above the limit, a
//     negative size, a header or body kmsg cannot decode, or a frame stalled
//     for connections.max.idle.ms closes the connection; so does a
//     connection idle that long between requests.
//   - At most max.connections are open, and at most max.connections.per.ip
//     from one client address (or its max.connections.per.ip.overrides
//     bound); one more is accepted and closed at once.
//   - Writing a response may take at most response.write.timeout.ms: a
//     client that stops reading has its connection closed then, and its
//     Fetch memory goes back.
//   - Requests on a connection are handled one at a time, responses in
//     order; a Fetch holds at most its budget (max_bytes capped by
//     fetch.max.bytes and by the sum of its partition_max_bytes, plus the
//     one batch that may exceed it) and a response buffer of the same
//     size.
//   - All Fetches together hold at most fetch.response.memory.bytes
//     (fetchmem.go): each reserves twice its budget before it reads (at
//     most the whole), waiting up to its max_wait_ms (a wait that, as a
//     long poll, ends when the client leaves or the listener stops),
//     keeps twice what it read while it long-polls, and gives it all back
//     once its response is written. One that gets nothing in time
//     answers its partitions' offsets with no records, as an empty long
//     poll does; the client fetches again.
//   - Connections are closed, counted by reason
//     (tierd_kafka_connections_closed_total) and logged once per client when
//     the client is at fault.
//   - With WithTLS (security.protocol=SSL on the client), a connection's TLS
//     handshake must finish within connections.max.idle.ms before its first
//     request is read; a failed one (no client certificate under mutual TLS,
//     an untrusted one, a plaintext client) closes it with reason
//     tls_handshake_failed.
//
// # Metrics
//
// tierd_kafka_requests_total{api,version}, tierd_kafka_errors_total{api,
// code} (error names), tierd_kafka_bytes_out_total{api},
// tierd_kafka_request_duration_seconds{api}, tierd_kafka_connections,
// tierd_kafka_connections_closed_total{reason},
// tierd_kafka_fetch_memory_bytes and
// tierd_kafka_fetch_memory_waits_total{outcome}. Requests for APIs not
// served count under api="other".
package listener
