package remoteread

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/remotelog"
)

// WithPartitionLabels shares the bound on per-partition metric series
// (metrics.partition.labels.max) with other packages; by default the
// engine has its own, of partlabels.DefaultMax partitions.
func WithPartitionLabels(l *partlabels.Set) Option { return func(s *Engine) { s.labels = l } }

// kafkaMetrics are the remote-read metrics named after Kafka's
// (RemoteStorageMetrics, KIP-405): Kafka counts them per topic, tierd per
// topic and partition, bounded by partlabels.
type kafkaMetrics struct {
	bytes, requests, errors *prometheus.CounterVec
	duration                prometheus.Histogram
}

func newKafkaMetrics(f promauto.Factory) kafkaMetrics {
	tp := []string{"topic", "partition"}
	return kafkaMetrics{
		bytes: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_remote_fetch_bytes_total",
			Help: "Bytes of record batches answered from the remote tier, from the cache or the store (Kafka's RemoteFetchBytesPerSec)."}, tp),
		requests: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_remote_fetch_requests_total",
			Help: "Reads of the remote tier by offset: Fetch RPCs and ReadRemote calls (Kafka's RemoteFetchRequestsPerSec)."}, tp),
		errors: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_remote_fetch_errors_total",
			Help: "Reads of the remote tier that failed on tierd's side: data loss, or the store failing or not answering in time (Kafka's RemoteFetchErrorsPerSec)."}, tp),
		duration: f.NewHistogram(prometheus.HistogramOpts{Name: "tierd_remote_fetch_duration_seconds",
			Help: "Time to answer a read of the remote tier by offset, whatever its outcome.", Buckets: prometheus.ExponentialBucketsRange(0.0005, 30, 14)}),
	}
}

// zero creates a partition's series (labels from partlabels) at 0.
func (m kafkaMetrics) zero(topic, partition string) {
	for _, v := range []*prometheus.CounterVec{m.bytes, m.requests, m.errors} {
		v.WithLabelValues(topic, partition)
	}
}

// countFetch counts one read by offset that started at start, with its
// answer and error: the caller's mistakes (an invalid argument, an offset
// out of range, a partition with nothing tiered, a cancelled call) are
// requests, not errors.
func (s *Engine) countFetch(tp remotelog.TopicPartition, start time.Time, rr *RemoteRead, errp *error) {
	s.km.duration.Observe(time.Since(start).Seconds())
	if tp.Topic == "" || tp.Partition < 0 {
		return
	}
	t, p := s.labels.Labels(tp.Topic, tp.Partition)
	s.km.requests.WithLabelValues(t, p).Inc()
	failures := s.km.errors.WithLabelValues(t, p) // present from the first request on
	var re *RangeError
	switch err := *errp; {
	case err == nil:
		s.km.bytes.WithLabelValues(t, p).Add(float64(rr.n))
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrNotTiered), errors.As(err, &re), errors.Is(err, context.Canceled):
	default:
		failures.Inc()
	}
}
