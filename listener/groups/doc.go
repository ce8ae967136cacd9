// Package groups is the consumer group coordinator of tierd's Kafka
// listener: Kafka's classic group protocol (the one every consumer
// client speaks; KIP-848's ConsumerGroupHeartbeat is not served, so
// clients that prefer it fall back to this one) and the committed
// offsets of each group, kept in a Store (rlmm's 'g' family in tierd).
//
// With kafka.group.coordinator local (the default without a Kafka
// cluster), tierd is the coordinator of every group its listener is asked
// for, and its groups are its own: a group of the same name in the Kafka
// cluster is another group, with its own members and offsets
// (docs/reads.md says how a consumer moves from one to the other). With
// cluster, the listener relays the group protocol to the cluster instead
// (listener.WithGroupForwarding) and this package is not used.
//
// The package decodes nothing from the wire: the listener hands it kmsg
// requests it has already authorized, and it answers kmsg responses. It
// is safe for concurrent use by many connections; JoinGroup and
// SyncGroup wait, as a broker's do, until their phase completes.
//
// # States and rules
//
// A group moves between Kafka's ClassicGroupState states, by the rules of
// Kafka's GroupMetadataManager for classic groups (Kafka 3.9/4.0):
//
//	from                  event                                to
//	Empty                 a member joins                       PreparingRebalance, completing after
//	                                                           group.initial.rebalance.delay.ms (each new
//	                                                           member extends it, up to the largest
//	                                                           rebalance timeout)
//	Stable                the leader rejoins, a member joins   PreparingRebalance
//	                      with other protocols, a new member
//	                      joins, a member leaves or its
//	                      session expires
//	Stable                a follower rejoins unchanged         Stable (its generation's answer again)
//	Stable                a static member (KIP-345) rejoins    Stable, new member id, old one
//	                      without member id, same protocols    FENCED_INSTANCE_ID, assignment kept
//	PreparingRebalance    every member rejoined, or the        CompletingRebalance (generation + 1;
//	                      largest rebalance timeout passed     members that did not rejoin removed;
//	                                                           the leader gets every member's metadata)
//	                                                           or Empty (no member left)
//	CompletingRebalance   the leader's SyncGroup               Stable (every member's assignment)
//	CompletingRebalance   the rebalance timeout passes         PreparingRebalance (members that did not
//	                      without it                           sync removed)
//	Empty                 offsets.retention.minutes after it   Dead (removed, with its offsets)
//	                      emptied, every offset expired
//	Empty                 DeleteGroups                         Dead
//
// A member's session counts in every state: one that neither waits in
// JoinGroup or SyncGroup nor heartbeats within its session timeout is
// removed, also during a rebalance, which then need not wait for it.
//
// Requests are refused as Kafka refuses them: an empty group id, or one
// longer than 32767 bytes (what a Kafka string and the store's keys
// hold), INVALID_GROUP_ID; a session timeout outside group.min/max.session.timeout.ms
// INVALID_SESSION_TIMEOUT; a protocol type or protocols the group does
// not share INCONSISTENT_GROUP_PROTOCOL; a new dynamic member of v4+ is
// asked to come back with its id (MEMBER_ID_REQUIRED, KIP-394), and an
// id never used expires after its session timeout; past group.max.size
// (members, or in a join phase those waiting in it: Kafka's
// acceptJoiningMember) GROUP_MAX_SIZE_REACHED; an unknown member UNKNOWN_MEMBER_ID; a static
// member under another member id FENCED_INSTANCE_ID; another generation
// ILLEGAL_GENERATION; a heartbeat or commit during a rebalance
// REBALANCE_IN_PROGRESS; before Load finished COORDINATOR_LOAD_IN_PROGRESS;
// past group.max.count groups, or a store that takes no write,
// COORDINATOR_NOT_AVAILABLE (clients look for the coordinator again; an
// assignment not stored also rebalances the group, and a static member's
// new id not stored leaves the old one in place). A JoinGroup or
// SyncGroup that a second one of the same member supersedes while it
// waits is answered REBALANCE_IN_PROGRESS, so no request waits for ever.
//
// # Offsets
//
// OffsetCommit with generation -1 and no member id is a "simple" commit,
// taken only while the group is Empty (a group is made for it); any other
// needs the group's member and generation. A commit is durable before
// its answer is sent: a store error answers COORDINATOR_NOT_AVAILABLE and
// changes nothing. Metadata longer than offset.metadata.max.bytes is
// OFFSET_METADATA_TOO_LARGE. Offsets expire as KIP-211 says: those of an
// Empty group offsets.retention.minutes after the later of their commit
// and the group emptying; in a consumer group with members, those of
// topics no member subscribes to, counted from their commit. OffsetDelete
// refuses the topics a member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC).
//
// # Records
//
// The Store keeps, per group, one record and one value per committed
// partition; both are JSON, so a tierd reading them names what it cannot
// read rather than guessing.
//
//	group record   {"version":1, "protocol_type", "protocol", "generation",
//	                "leader", "since_ms", "members":[{"id", "instance_id",
//	                "client_id", "client_host", "session_ms", "rebalance_ms",
//	                "metadata" (base64), "assignment" (base64)}]}
//	offset         {"offset", "leader_epoch" (-1: none), "metadata",
//	                "commit_ms"}
//
// The record is written when a generation becomes Stable (with its
// members and assignments), when a group empties, and when a static
// member takes a new id; a group between generations is stored as its
// last one. A record of another version is an error at Load, which fails
// Run: groups are not dropped on evidence a newer tierd wrote them. After
// a restart a group with members comes back Stable at its generation:
// members that heartbeat on keep their assignment, members that do not
// expire after their session timeout, and the group rebalances as it
// would have.
package groups
