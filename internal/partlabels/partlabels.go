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
	on  []func(topic, partition string)
}

// OnAdmit calls fn with the labels of every partition admitted so far,
// then of each one admitted later (the first time Labels gives it its own
// labels), and with OtherTopic and OtherPartition now: a metric's owner
// creates its zero series with it, so that a counter exists before its
// first event (alerts and absent() see it). fn runs without the set's
// lock held and must not call OnAdmit.
func (s *Set) OnAdmit(fn func(topic, partition string)) {
	s.mu.Lock()
	s.on = append(s.on, fn)
	have := make([]key, 0, len(s.own))
	for k := range s.own {
		have = append(have, k)
	}
	own := make([]string, len(have))
	for i, k := range have {
		own[i] = s.own[k]
	}
	s.mu.Unlock()
	fn(OtherTopic, OtherPartition)
	for i, k := range have {
		fn(k.topic, own[i])
	}
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
	if p, ok := s.own[k]; ok {
		s.mu.Unlock()
		return topic, p
	}
	if len(s.own) >= s.max {
		s.mu.Unlock()
		return OtherTopic, OtherPartition
	}
	p := strconv.Itoa(int(partition))
	s.own[k] = p
	on := s.on
	s.mu.Unlock()
	for _, fn := range on {
		fn(topic, p)
	}
	return topic, p
}
