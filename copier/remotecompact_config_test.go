package copier

import (
	"testing"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier/remotecompact"
)

// TestCompactionResolution: copier.remote_compaction, then the topic's
// entry, then a value the cluster set for the topic; Kafka's built-in
// defaults from the cluster and unparsable or out-of-range values are
// ignored, and each value names its source.
func TestCompactionResolution(t *testing.T) {
	c := DefaultConfig()
	c.RemoteCompaction.SegmentBytes = 2000
	ratio, horizon, tiny := 0.1, int64(60000), int64(10)
	c.Topics = map[string]TopicConfig{"orders": {MinCleanableDirtyRatio: &ratio, DeleteRetentionMs: &horizon, SegmentBytes: &tiny}}
	s, from := c.compaction("orders", nil)
	if s != (remotecompact.Settings{SegmentBytes: 2000, DirtyRatio: 0.1, DeleteRetentionMs: 60000}) ||
		from[cfgSegmentBytes] != "copier.remote_compaction.segment.bytes" || from[cfgMinCleanableRatio] != "copier.topics.orders" {
		t.Fatalf("from the file: %+v %v", s, from)
	}
	configs := map[string]cluster.ConfigValue{
		cfgSegmentBytes:      {Value: "4096", Source: "DYNAMIC_TOPIC_CONFIG"},
		cfgMinCleanableRatio: {Value: "0.5", Source: "DEFAULT_CONFIG", IsDefault: true},
		cfgDeleteRetentionMs: {Value: "soon", Source: "DYNAMIC_TOPIC_CONFIG"},
	}
	s, from = c.compaction("orders", configs)
	if s != (remotecompact.Settings{SegmentBytes: 4096, DirtyRatio: 0.1, DeleteRetentionMs: 60000}) ||
		from[cfgSegmentBytes] != "cluster DYNAMIC_TOPIC_CONFIG" || from[cfgDeleteRetentionMs] != "copier.topics.orders" {
		t.Fatalf("with the cluster: %+v %v", s, from)
	}
	if s, _ := c.compaction("other", configs); s.DirtyRatio != 0.5 || s.DeleteRetentionMs != DefaultRemoteCompaction().DeleteRetentionMs {
		t.Fatalf("a topic without an entry: %+v", s)
	}
	if err := c.Validate(); err == nil {
		t.Fatal("Validate took segment.bytes 10 in a topic's entry")
	}
}
