package rsmapi

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/remotelog"
)

// Operations, the op label of the latency histogram.
const (
	opCopy       = "copy"
	opFetchLog   = "fetch_log"
	opFetchIndex = "fetch_index"
	opDelete     = "delete"
)

// metrics are the endpoint's series. The per-partition ones are named
// after Kafka's BrokerTopicMetrics of remote storage (RemoteStorageMetrics,
// KIP-405), under tierd_rsm_ so as not to meet the copier's and fetch's
// tierd_remote_* series: these count the broker's calls.
type metrics struct {
	labels *partlabels.Set

	copyBytes, copyReqs, copyErrs    *prometheus.CounterVec
	fetchBytes, fetchReqs, fetchErrs *prometheus.CounterVec
	deleteReqs, deleteErrs           *prometheus.CounterVec
	duration                         *prometheus.HistogramVec
	answers                          *prometheus.CounterVec
	authFailures                     *prometheus.CounterVec
	inFlight                         prometheus.GaugeFunc
	rebuiltIndexes, discarded        prometheus.Counter

	// totals for the status (the counters hold them too, per partition)
	nCopies, nCopyErrs, nFetches, nFetchErrs, nDeletes, nDeleteErrs, nAuth atomic.Int64
}

func newMetrics(reg prometheus.Registerer, labels *partlabels.Set, copying func() int) *metrics {
	f := promauto.With(reg)
	tp := []string{"topic", "partition"}
	m := &metrics{labels: labels,
		copyBytes: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_copy_bytes_total",
			Help: "Bytes of .log the broker's RSM plugin copied through the endpoint (Kafka's RemoteCopyBytesPerSec)."}, tp),
		copyReqs: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_copy_requests_total",
			Help: "Copy requests (copyLogSegmentData) to the endpoint (Kafka's RemoteCopyRequestsPerSec)."}, tp),
		copyErrs: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_copy_errors_total",
			Help: "Copy requests that failed (Kafka's RemoteCopyErrorsPerSec)."}, tp),
		fetchBytes: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_fetch_bytes_total",
			Help: "Bytes of .log the endpoint answered reads with (fetchLogSegment; Kafka's RemoteFetchBytesPerSec)."}, tp),
		fetchReqs: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_fetch_requests_total",
			Help: "Reads of a copy's .log or an index (fetchLogSegment, fetchIndex; Kafka's RemoteFetchRequestsPerSec)."}, tp),
		fetchErrs: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_fetch_errors_total",
			Help: "Reads that failed, a missing optional index not counted (Kafka's RemoteFetchErrorsPerSec)."}, tp),
		deleteReqs: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_delete_requests_total",
			Help: "Delete requests (deleteLogSegmentData; Kafka's RemoteDeleteRequestsPerSec)."}, tp),
		deleteErrs: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_delete_errors_total",
			Help: "Delete requests that failed (Kafka's RemoteDeleteErrorsPerSec)."}, tp),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "tierd_rsm_request_duration_seconds",
			Help:    "Time from a request's arrival to its answer, seconds, by operation (copy, fetch_log, fetch_index, delete).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"op"}),
		answers: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_answers_total",
			Help: "Answers by operation and reason (OK, or the reason of the package doc's status table)."}, []string{"op", "reason"}),
		authFailures: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_rsm_auth_failures_total",
			Help: "Requests refused 401, by reason: missing (no bearer token) or wrong (another token)."}, []string{"reason"}),
		rebuiltIndexes: f.NewCounter(prometheus.CounterOpts{Name: "tierd_rsm_rebuilt_indexes_total",
			Help: "Copies whose offset and time indexes failed their checks and were rebuilt from the log."}),
		discarded: f.NewCounter(prometheus.CounterOpts{Name: "tierd_rsm_discarded_attempts_total",
			Help: "Copy attempts whose objects tierd deleted because their request never got success."}),
	}
	m.inFlight = f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tierd_rsm_copies_in_flight", Help: "Copies running now."},
		func() float64 { return float64(copying()) })
	for _, op := range []string{opCopy, opFetchLog, opFetchIndex, opDelete} {
		m.duration.WithLabelValues(op)
		m.answers.WithLabelValues(op, "OK")
	}
	for _, r := range []string{"missing", "wrong"} {
		m.authFailures.WithLabelValues(r)
	}
	labels.OnAdmit(m.zero)
	return m
}

// zero creates a partition's counters at 0, so that alerts and absent()
// see them before the first event.
func (m *metrics) zero(topic, partition string) {
	for _, v := range []*prometheus.CounterVec{m.copyBytes, m.copyReqs, m.copyErrs, m.fetchBytes, m.fetchReqs, m.fetchErrs, m.deleteReqs, m.deleteErrs} {
		v.WithLabelValues(topic, partition)
	}
}

// partition returns the bounded label values of tp.
func (m *metrics) partition(tp remotelog.TopicPartition) []string {
	t, p := m.labels.Labels(tp.Topic, tp.Partition)
	return []string{t, p}
}

// observe records one answered request of op for tp (nil: the request
// named no partition), with its reason, whether it counts as an error,
// and how long it took.
func (m *metrics) observe(op string, tp *remotelog.TopicPartition, reason string, failed bool, began time.Time) {
	m.duration.WithLabelValues(op).Observe(time.Since(began).Seconds())
	m.answers.WithLabelValues(op, reason).Inc()
	if tp == nil {
		return
	}
	lv := m.partition(*tp)
	switch op {
	case opCopy:
		m.copyReqs.WithLabelValues(lv...).Inc()
		m.nCopies.Add(1)
		if failed {
			m.copyErrs.WithLabelValues(lv...).Inc()
			m.nCopyErrs.Add(1)
		}
	case opFetchLog, opFetchIndex:
		m.fetchReqs.WithLabelValues(lv...).Inc()
		m.nFetches.Add(1)
		if failed {
			m.fetchErrs.WithLabelValues(lv...).Inc()
			m.nFetchErrs.Add(1)
		}
	case opDelete:
		m.deleteReqs.WithLabelValues(lv...).Inc()
		m.nDeletes.Add(1)
		if failed {
			m.deleteErrs.WithLabelValues(lv...).Inc()
			m.nDeleteErrs.Add(1)
		}
	}
}
