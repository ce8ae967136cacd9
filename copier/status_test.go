package copier

import (
	"github.com/tierd/tierd/internal/remotelog"
)

// heldOf returns the partitions the last pass held, with their hold
// reasons, from Status.
func heldOf(c *Copier) map[remotelog.TopicPartition]string {
	out := map[remotelog.TopicPartition]string{}
	for _, p := range c.Status().Partitions {
		if p.Reason == remotelog.WaitHeld {
			out[remotelog.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.Held
		}
	}
	return out
}
