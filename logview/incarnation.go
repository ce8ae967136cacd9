package logview

import (
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/locallog"
)

// cachedTopicID is a partition directory's partition.metadata topic id as
// last read.
type cachedTopicID struct {
	dir string
	id  string // "" when the file is absent or unreadable
	at  time.Time
}

// sameIncarnation reports whether the remote copies (offs) belong to the
// same incarnation of the topic as the local partition directory: false
// only when both record a topic id and the ids differ, as after the topic
// was deleted and created again under the same name while the old
// incarnation's copies wait for their deletion (they are then no part of
// the new log: their offsets would hide its first offsets, and their
// records would be read as its own). When either id is unknown (logs
// from brokers before 2.8, tierd's segment log) the tiers are joined.
func (v *View) sameIncarnation(p *locallog.Partition, offs remotelog.PartitionOffsets) bool {
	if p == nil || offs.TopicID == "" {
		return true
	}
	id := v.localTopicID(p)
	if id == "" || id == offs.TopicID {
		return true
	}
	v.mu.Lock()
	v.warnOnce("incarnation:"+p.Dir()+":"+offs.TopicID, "remote copies belong to another incarnation of the topic (another topic id); serving the local log only",
		"partition", p.TopicPartition().String(), "local_topic_id", id, "remote_topic_id", offs.TopicID)
	v.mu.Unlock()
	return false
}

// localTopicID returns the topic id of p's partition.metadata, read again
// when the cached one is older than CacheTTL or was read for another
// directory.
func (v *View) localTopicID(p *locallog.Partition) string {
	tp := p.TopicPartition()
	v.mu.Lock()
	c, ok := v.ids[tp]
	v.mu.Unlock()
	if ok && c.dir == p.Dir() && time.Since(c.at) < v.cfg.CacheTTL {
		return c.id
	}
	id, err := p.TopicID()
	if err != nil {
		id = "" // unreadable: the copier holds such a partition; nothing to compare
	}
	v.mu.Lock()
	if v.ids == nil {
		v.ids = map[kafkalog.TopicPartition]cachedTopicID{}
	}
	v.ids[tp] = cachedTopicID{dir: p.Dir(), id: id, at: time.Now()}
	v.mu.Unlock()
	return id
}
