// Package rlmm is tierd's RemoteLogMetadataManager: Kafka's
// RemoteLogSegmentMetadata rows and their states, kept in Pebble.
//
// # Key space
//
// One Pebble store holds every family below; the first byte of a key
// names its family, and a partition is encoded as its topic, a 0x00 byte
// and its partition number as 4 big-endian bytes, offsets as 8
// big-endian bytes, so scans come out ordered by partition, then start
// offset. Values are JSON unless said otherwise.
//
//	's' partition startOffset segmentID(16) -> SegmentMetadata: tierd's own copies, any state
//	'f' partition startOffset segmentID(16) -> the same, COPY_SEGMENT_FINISHED rows only
//	'p' partition                           -> PartitionOffsets
//	'd' partition topicID                   -> PartitionDeletion (a scheduled deletion)
//	'j' seq(8)                              -> JournalEntry (the deletion journal)
//	'b' partition startOffset segmentID(16) -> SegmentMetadata: broker-owned copies
//	'B' partition segmentID(16)             -> startOffset(8), raw: the 'b' row of an id
//	'g' len(2) group 'm'                    -> a consumer group's record (listener/groups)
//	'g' len(2) group 'o' partition          -> one of its committed offsets
//	"v"                                     -> the layout version, "2"
//	"mcluster_id"                           -> the Kafka cluster id, raw
//
// The 'b' and 'B' families are the broker-copy catalogue
// (brokercopies.go): copies a Kafka broker made through tierd's RSM
// endpoint, whose truth is the broker's own remote log metadata
// (__remote_log_metadata) and whose retention is the broker's. Only the
// BrokerCopy methods read or write them: Partitions, Segments,
// FinishedSegments, Snapshot, FinishedSnapshot, Offsets, the change log
// (PartitionVersion, ChangesSince) and the Generation never see them,
// and tierd's copier, which reaches the store through an interface
// without those methods, can neither read nor delete them. A rebuild's
// CarryOver copies them to the new store.
package rlmm
