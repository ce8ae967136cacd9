// Package partlabels bounds the number of per-partition metric series.
// Kafka reports its tiered-storage metrics per topic (and sums them per
// partition inside the broker); tierd labels them by topic and partition,
// which a broker with many thousands of partitions would turn into as
// many series. A Set gives the first Max partitions it is asked about
// their own labels and every later one the aggregate labels
// {topic="_other", partition="-1"}, so each metric has at most Max + 1
// series per label set. A partition once given its own labels keeps them
// for the life of the process (a counter's series never moves).
package partlabels

import (
	"strconv"
	"sync"
)

// The aggregate labels of the partitions beyond the cap.
const (
	OtherTopic     = "_other"
	OtherPartition = "-1"
)

// DefaultMax is the default cap on partitions with their own series
// (metrics.partition.labels.max).
const DefaultMax = 1000

// Set hands out bounded topic and partition label values. It is safe for
// concurrent use.
type Set struct {
	max int
	mu  sync.Mutex
	own map[key]string // admitted partitions and their partition label
}

type key struct {
	topic     string
	partition int32
}

// New returns a set that gives at most max partitions (>= 0) their own
// labels; 0 puts every partition in the aggregate.
func New(max int) *Set { return &Set{max: max, own: map[key]string{}} }

// Max returns the cap.
func (s *Set) Max() int { return s.max }

// Labels returns the topic and partition label values of a partition:
// its own while fewer than Max partitions have theirs (or it has), else
// OtherTopic and OtherPartition.
func (s *Set) Labels(topic string, partition int32) (string, string) {
	k := key{topic, partition}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.own[k]; ok {
		return topic, p
	}
	if len(s.own) >= s.max {
		return OtherTopic, OtherPartition
	}
	p := strconv.Itoa(int(partition))
	s.own[k] = p
	return topic, p
}
