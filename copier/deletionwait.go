package copier

import (
	"fmt"

	"github.com/tierd/tierd/internal/remotelog"
)

// waitForConfigs records that a due tiering-disabled deletion waits
// because the configured cluster no longer lists its topic (err wraps
// errTopicNotInCluster): the partition's status says so at the end of the
// pass, and the log says so once per deletion, with what the operator can
// do. Deleting on tierd.yaml alone would be unsafe (the cluster's configs
// may have ordered the deletion, or may override tierd.yaml), and so
// would cancelling (the topic may be back with the same configs).
func (w *partitionDeletions) waitForConfigs(d remotelog.PartitionDeletion, err error) {
	tp := d.TopicPartition
	detail := fmt.Sprintf("a tiering-disabled deletion of %d copies (%d bytes, topic id %q), due since %s, waits: %v. "+
		"Neither tierd.yaml alone nor the topic's absence proves the configuration still orders it, so it neither runs nor is cancelled "+
		"until the cluster lists the topic again and its configs are read. To act now: 'tierd partitions restore --config <file> %s' "+
		"cancels it and keeps the copies; if the topic was deleted, 'tierd topics delete --config <file> --topic-id %s %s' then orders "+
		"the deletion on the cluster's confirmation",
		len(d.Segments), d.Bytes(), d.TopicID, remotelog.DueText(d.DueMs), err, tp, d.TopicID, tp.Topic)
	w.noteWait(tp, detail)
	if w.say.once("deletion-waits-configs " + tp.String() + " " + d.TopicID) {
		w.log.Warn("scheduled deletion waits for the topic's configs: the kafka cluster no longer lists the topic",
			"partition", tp, "topic_id", d.TopicID, "reason", d.Reason, "copies", len(d.Segments), "bytes", d.Bytes(), "detail", detail)
	}
}
