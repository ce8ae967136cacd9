package copier

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/remotelog"
)

// metricValue returns the value of the series of name with exactly these
// labels (a counter's, gauge's or histogram's sample count), and whether
// there is one.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// TestKafkaNamedMetrics: the lag, size and request metrics agree with what
// was copied and what waits, per partition, and the partitions past the
// label cap share the aggregate series.
func TestKafkaNamedMetrics(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	_, reg := r.observe(WithPartitionLabels(partlabels.New(1)))
	ts := r.now.UnixMilli()
	other := remotelog.TopicPartition{Topic: "orders", Partition: 1}
	otherDir := r.dir()[:len(r.dir())-1] + "1"
	var copied, waiting int64
	for i := int64(0); i < 2; i++ {
		copied += writeSegment(t, r.dir(), i*10, seq(i*10, 10), same(ts, 10), 100)
		waiting += writeSegment(t, otherDir, i*10, seq(i*10, 10), same(ts, 10), 50)
	}
	writeSegment(t, r.dir(), 20, nil, nil, 0)
	writeSegment(t, otherDir, 20, nil, nil, 0)
	writeCheckpoint(t, r.logDir, "orders 0 20") // orders-1 is not in it
	if n := r.sync(); n != 2 {
		t.Fatalf("copied %d", n)
	}
	if st := r.status(other); st.Reason != remotelog.WaitNotInCheckpoint || st.PendingBytes != waiting {
		t.Fatalf("orders-1: %+v", st)
	}
	own := map[string]string{"topic": "orders", "partition": "0"}
	agg := map[string]string{"topic": partlabels.OtherTopic, "partition": partlabels.OtherPartition}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"tierd_remote_copy_lag_bytes", own, 0},
		{"tierd_remote_copy_lag_segments", own, 0},
		{"tierd_remote_copy_lag_bytes", agg, float64(waiting)},
		{"tierd_remote_copy_lag_segments", agg, 2},
		{"tierd_remote_log_size_bytes", own, float64(copied)},
		{"tierd_remote_log_stored_bytes", own, float64(copied)}, // plain copies: as they came
		{"tierd_remote_log_metadata_count", own, 2},
		{"tierd_remote_delete_lag_segments", own, 0},
		{"tierd_remote_copy_bytes_total", own, float64(copied)},
		{"tierd_remote_copy_requests_total", own, 2},
		{"tierd_remote_copy_errors_total", own, 0},
		{"tierd_remote_copy_duration_seconds", nil, 2},
		{"tierd_copier_partition_status", map[string]string{"state": "up_to_date"}, 1},
		{"tierd_copier_partition_status", map[string]string{"state": "waiting"}, 1},
		{"tierd_copier_partition_status", map[string]string{"state": "copying"}, 0},
		{"tierd_copier_partitions_waiting", map[string]string{"reason": "not_in_checkpoint"}, 1},
		{"tierd_copier_last_success_timestamp_seconds", nil, float64(ts) / 1000},
		{"tierd_copier_copied_bytes_total", nil, float64(copied)}, // the name from before stays
	} {
		if got, ok := metricValue(t, reg, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if _, ok := metricValue(t, reg, "tierd_remote_copy_lag_bytes", map[string]string{"topic": "orders", "partition": "1"}); ok {
		t.Error("orders-1 has a series of its own past the cap of 1")
	}

	// Remote retention deletes both copies: delete requests are counted
	// and nothing is left to delete.
	r.c.cfg.Retention.RetentionMs = ptr(1)
	r.now = r.now.Add(1e9)
	r.sync()
	if got, _ := metricValue(t, reg, "tierd_remote_delete_requests_total", own); got != 2 {
		t.Errorf("delete requests %v, want 2", got)
	}
	if got, _ := metricValue(t, reg, "tierd_remote_log_size_bytes", own); got != 0 {
		t.Errorf("remote size after retention %v", got)
	}
}
