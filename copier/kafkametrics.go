package copier

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/remotelog"
)

// WithPartitionLabels shares the bound on per-partition metric series
// (metrics.partition.labels.max) with other packages; by default the
// copier has its own, of partlabels.DefaultMax partitions.
func WithPartitionLabels(s *partlabels.Set) Option { return func(c *Copier) { c.rep.labels = s } }

// defaultProgressEvery is how often a copy still running logs its
// progress.
const defaultProgressEvery = 5 * time.Second

// remoteMetrics are the metrics named after Kafka's tiered-storage
// metrics (KIP-405 RemoteStorageMetrics, KIP-963 lag and size gauges):
// Kafka's BrokerTopicMetrics per topic become series per topic and
// partition here, bounded by partlabels (the partitions past the cap
// share {topic="_other", partition="-1"}). The gauges are computed from
// Status when scraped.
type remoteMetrics struct {
	copyBytes, copyRequests, copyErrors *prometheus.CounterVec
	deleteRequests, deleteErrors        *prometheus.CounterVec
	copyDuration                        prometheus.Histogram
}

// register registers the reporter's metrics with reg: the counters and
// the histogram above, the pass timestamps, and the gauges computed from
// Status. Without labels of its own (WithPartitionLabels) it gets a set
// of partlabels.DefaultMax partitions.
func (r *reporter) register(reg prometheus.Registerer) {
	if r.labels == nil {
		r.labels = partlabels.New(partlabels.DefaultMax)
	}
	f := promauto.With(reg)
	tp := []string{"topic", "partition"}
	counter := func(name, help string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, tp)
	}
	r.rm = &remoteMetrics{
		copyBytes:      counter("tierd_remote_copy_bytes_total", "Bytes of .log copied to remote storage by finished copies (Kafka's RemoteCopyBytesPerSec)."),
		copyRequests:   counter("tierd_remote_copy_requests_total", "Segment copy attempts (Kafka's RemoteCopyRequestsPerSec)."),
		copyErrors:     counter("tierd_remote_copy_errors_total", "Segment copy attempts that failed (Kafka's RemoteCopyErrorsPerSec)."),
		deleteRequests: counter("tierd_remote_delete_requests_total", "Remote segment copy deletions (Kafka's RemoteDeleteRequestsPerSec)."),
		deleteErrors:   counter("tierd_remote_delete_errors_total", "Remote segment copy deletions that failed (Kafka's RemoteDeleteErrorsPerSec)."),
		copyDuration: f.NewHistogram(prometheus.HistogramOpts{Name: "tierd_remote_copy_duration_seconds",
			Help: "Time to upload one segment copy and check it stored, for copies that finished.", Buckets: prometheus.ExponentialBucketsRange(0.05, 600, 12)}),
	}
	// Every counter has its series from the start: the aggregate's, and
	// each partition's as soon as it has labels of its own.
	r.labels.OnAdmit(func(t, p string) {
		for _, v := range []*prometheus.CounterVec{r.rm.copyBytes, r.rm.copyRequests, r.rm.copyErrors, r.rm.deleteRequests, r.rm.deleteErrors} {
			v.WithLabelValues(t, p)
		}
	})
	stamp := func(ms int64) float64 {
		if ms < 0 {
			return 0
		}
		return float64(ms) / 1000
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tierd_copier_last_success_timestamp_seconds",
		Help: "When the last successful sync pass ended: it ran (not skipped for the object store or metadata dir) and no partition failed (partitions waiting on the broker, the cluster, another tierd or an operator do not count), seconds since the Unix epoch (0: none yet)."}, func() float64 {
		r.st.mu.Lock()
		defer r.st.mu.Unlock()
		return stamp(r.st.lastSuccessMs)
	})
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tierd_copier_last_pass_timestamp_seconds",
		Help: "When the last sync pass ended, with or without errors, seconds since the Unix epoch (0: none yet)."}, func() float64 {
		r.st.mu.Lock()
		defer r.st.mu.Unlock()
		return stamp(r.st.lastPassMs)
	})
	reg.MustRegister(&statusCollector{r: r})
}

// countCopy counts one copy attempt of size bytes that took d.
func (r *reporter) countCopy(tp remotelog.TopicPartition, size int64, d time.Duration, err error) {
	t, p := r.labels.Labels(tp.Topic, tp.Partition)
	r.rm.copyRequests.WithLabelValues(t, p).Inc()
	errs := r.rm.copyErrors.WithLabelValues(t, p) // present from the first request on
	if err != nil {
		errs.Inc()
		return
	}
	r.rm.copyBytes.WithLabelValues(t, p).Add(float64(size))
	r.rm.copyDuration.Observe(d.Seconds())
}

// countDelete counts one deletion of a copy's objects.
func (r *reporter) countDelete(tp remotelog.TopicPartition, err error) {
	t, p := r.labels.Labels(tp.Topic, tp.Partition)
	r.rm.deleteRequests.WithLabelValues(t, p).Inc()
	errs := r.rm.deleteErrors.WithLabelValues(t, p)
	if err != nil {
		errs.Inc()
	}
}

// statusCollector turns Status into gauges when scraped: per partition
// (bounded) the lag and size gauges, and the partitions by state and by
// wait reason.
type statusCollector struct{ r *reporter }

var (
	tpLabels           = []string{"topic", "partition"}
	descCopyLagBytes   = prometheus.NewDesc("tierd_remote_copy_lag_bytes", "Bytes of rolled segments not yet copied (Kafka's RemoteCopyLagBytes).", tpLabels, nil)
	descCopyLagSegs    = prometheus.NewDesc("tierd_remote_copy_lag_segments", "Rolled segments not yet copied (Kafka's RemoteCopyLagSegments).", tpLabels, nil)
	descDeleteLagBytes = prometheus.NewDesc("tierd_remote_delete_lag_bytes",
		"Bytes of remote copies due for deletion and not yet deleted (Kafka's RemoteDeleteLagBytes).", tpLabels, nil)
	descDeleteLagSegs = prometheus.NewDesc("tierd_remote_delete_lag_segments",
		"Remote copies due for deletion and not yet deleted (Kafka's RemoteDeleteLagSegments).", tpLabels, nil)
	descLogSize = prometheus.NewDesc("tierd_remote_log_size_bytes", "Bytes of the finished remote copies (Kafka's RemoteLogSizeBytes).", tpLabels, nil)
	descStored  = prometheus.NewDesc("tierd_remote_log_stored_bytes",
		"Bytes the finished remote copies' .log objects take in the bucket: compressed and sealed for copies in chunked form, as tierd_remote_log_size_bytes for the others.", tpLabels, nil)
	descRows = prometheus.NewDesc("tierd_remote_log_metadata_count",
		"Remote log segment metadata rows not yet DELETE_SEGMENT_FINISHED (Kafka's RemoteLogMetadataCount).", tpLabels, nil)
	descState   = prometheus.NewDesc("tierd_copier_partition_status", "Partitions by tiering state (tierd status).", []string{"state"}, nil)
	descWaiting = prometheus.NewDesc("tierd_copier_partitions_waiting", "Partitions waiting, by reason (tierd status).", []string{"reason"}, nil)
)

func (sc *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCopyLagBytes, descCopyLagSegs, descDeleteLagBytes, descDeleteLagSegs, descLogSize, descStored, descRows, descState, descWaiting} {
		ch <- d
	}
}

func (sc *statusCollector) Collect(ch chan<- prometheus.Metric) {
	s := sc.r.status()
	states, reasons := s.Counts()
	for _, st := range remotelog.TierStates {
		ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, float64(states[st]), string(st))
	}
	for _, r := range remotelog.WaitReasons {
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(reasons[r]), string(r))
	}
	type labels struct{ topic, partition string }
	sums := map[labels]*[7]float64{}
	var order []labels
	for _, p := range s.Partitions {
		if p.State == remotelog.TierWaiting && (p.Reason == remotelog.WaitLeaseHeld || p.Reason == remotelog.WaitNotLeader) {
			continue // another tierd tiers it and reports it, as Kafka reports only on the leader
		}
		t, n := sc.r.labels.Labels(p.Topic, p.Partition)
		k := labels{t, n}
		v := sums[k]
		if v == nil {
			v = &[7]float64{}
			sums[k] = v
			order = append(order, k)
		}
		for i, x := range []float64{float64(p.PendingBytes), float64(p.PendingSegments), float64(p.DeleteLagBytes), float64(p.DeleteLagSegments),
			float64(p.RemoteBytes), float64(p.MetadataRows), float64(p.RemoteStoredBytes)} {
			v[i] += x
		}
	}
	descs := []*prometheus.Desc{descCopyLagBytes, descCopyLagSegs, descDeleteLagBytes, descDeleteLagSegs, descLogSize, descRows, descStored}
	for _, k := range order {
		for i, d := range descs {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, sums[k][i], k.topic, k.partition)
		}
	}
}
