package remotelog

// ConsumerGroupStatus is one consumer group as tierd's group coordinator
// (package listener/groups) holds it, for "tierd status" and the Admin
// API's ConsumerGroups.
type ConsumerGroupStatus struct {
	Group string `json:"group"`
	// State is Kafka's classic group state: Empty, PreparingRebalance,
	// CompletingRebalance or Stable.
	State        string              `json:"state"`
	ProtocolType string              `json:"protocol_type"` // "consumer" for consumers, "" for a group without members
	Protocol     string              `json:"protocol"`      // the generation's assignor, e.g. "range"
	Generation   int32               `json:"generation"`
	Members      []GroupMemberStatus `json:"members"`
	// Offsets are the committed offsets, by topic and partition.
	Offsets []GroupOffsetStatus `json:"offsets"`
}

// GroupMemberStatus is one member of a consumer group.
type GroupMemberStatus struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"` // a static member's (KIP-345)
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"` // "/" and the client's address, as Kafka shows it
	// Assigned are the partitions of its assignment, when the group's
	// protocol type is "consumer" (Kafka's ConsumerProtocolAssignment).
	Assigned []TopicPartition `json:"assigned"`
}

// GroupOffsetStatus is a group's committed offset of one partition and
// the partition's lag: the high watermark tierd serves minus the
// committed offset (-1 for both when the high watermark is unknown, e.g.
// a partition tierd no longer serves).
type GroupOffsetStatus struct {
	TopicPartition
	Committed     int64 `json:"committed"`
	HighWatermark int64 `json:"high_watermark"`
	Lag           int64 `json:"lag"`
}
