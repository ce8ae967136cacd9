package authz

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	refreshes *prometheus.CounterVec // result: ok, error
}

// newMetrics registers the Authorizer's metrics with reg (none when reg
// is nil): tierd_acl_refreshes_total{result}, and gauges read from a's
// state at scrape time: tierd_acls (ACLs deciding),
// tierd_acl_last_read_timestamp_seconds (0 before the first) and
// tierd_acl_stale (1 while every request but a super user's is denied).
func newMetrics(reg prometheus.Registerer, a *Authorizer) *metrics {
	f := promauto.With(reg)
	m := &metrics{refreshes: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_acl_refreshes_total",
		Help: "Reads of the ACLs from their source (the Kafka cluster or the ACL file), by result (ok, error)."}, []string{"result"})}
	m.refreshes.WithLabelValues("ok")
	m.refreshes.WithLabelValues("error")
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tierd_acls", Help: "ACLs deciding requests (the last read)."},
		func() float64 { return float64(a.Status().ACLs) })
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tierd_acl_last_read_timestamp_seconds",
		Help: "When the ACLs were last read successfully, Unix seconds; 0 before the first read."},
		func() float64 {
			if t := a.Status().LoadedAt; !t.IsZero() {
				return float64(t.UnixNano()) / 1e9
			}
			return 0
		})
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tierd_acl_stale",
		Help: "1 while reads of the ACLs have failed for longer than max_stale, and every request but a super user's is denied."},
		func() float64 {
			if a.Status().Stale {
				return 1
			}
			return 0
		})
	return m
}
