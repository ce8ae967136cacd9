package listener

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Reasons a connection is closed, the values of the reason label of
// tierd_kafka_connections_closed_total.
const (
	reasonClient       = "client_closed"          // the client closed it (EOF or reset)
	reasonIdle         = "idle"                   // nothing sent for connections.max.idle.ms
	reasonStalled      = "stalled"                // a frame begun and not finished within connections.max.idle.ms
	reasonTooLarge     = "frame_too_large"        // size above socket.request.max.bytes
	reasonNegative     = "negative_size"          // size below 0
	reasonMalformed    = "malformed_request"      // header or body kmsg cannot decode
	reasonUnsupported  = "unsupported_request"    // an API key or version not served
	reasonMaxConns     = "max_connections"        // over max.connections
	reasonMaxConnsIP   = "max_connections_per_ip" // over max.connections.per.ip from one address
	reasonWriteFailed  = "write_failed"           // a response could not be written in time
	reasonShutdown     = "shutdown"               // the listener stopped
	reasonServerFailed = "server_error"           // a handler failed in a way no response describes
	reasonTLS          = "tls_handshake_failed"   // the TLS handshake failed (WithTLS)
)

var closeReasons = []string{reasonClient, reasonIdle, reasonStalled, reasonTooLarge, reasonNegative,
	reasonMalformed, reasonUnsupported, reasonMaxConns, reasonMaxConnsIP, reasonWriteFailed, reasonShutdown, reasonServerFailed, reasonTLS,
	reasonSASLFailed, reasonSASLState, reasonSASLTimeout, reasonReauth}

// apiOther labels requests for APIs not served.
const apiOther = "other"

type metrics struct {
	requests *prometheus.CounterVec // api, version
	errors   *prometheus.CounterVec // api, code
	bytesOut *prometheus.CounterVec // api
	duration *prometheus.HistogramVec
	conns    prometheus.Gauge
	closed   *prometheus.CounterVec // reason

	logins *prometheus.CounterVec // mechanism, result

	fetchMem      prometheus.Gauge
	fetchMemWaits *prometheus.CounterVec // outcome
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_kafka_requests_total",
			Help: "Kafka protocol requests answered, by API and version (requests for APIs not served count under api=\"other\")."},
			[]string{"api", "version"}),
		errors: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_kafka_errors_total",
			Help: "Kafka error codes sent (each partition's, topic's or response's non-zero error code once), by API and code name."},
			[]string{"api", "code"}),
		bytesOut: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_kafka_bytes_out_total",
			Help: "Bytes of Kafka protocol responses written, size prefix included, by API."}, []string{"api"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "tierd_kafka_request_duration_seconds",
			Help:    "Time from a request's frame read to its response written, by API (long-polling fetches included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9)}, []string{"api"}),
		conns: f.NewGauge(prometheus.GaugeOpts{Name: "tierd_kafka_connections",
			Help: "Kafka client connections open."}),
		closed: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_kafka_connections_closed_total",
			Help: "Kafka client connections closed, by reason."}, []string{"reason"}),
		logins: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_kafka_sasl_logins_total",
			Help: "SASL logins on the Kafka listener (re-authentications included), by mechanism and result (ok; failed; unavailable: the Kafka cluster that checks logins could not be asked)."},
			[]string{"mechanism", "result"}),
		fetchMem: f.NewGauge(prometheus.GaugeOpts{Name: "tierd_kafka_fetch_memory_bytes",
			Help: "Bytes of fetch.response.memory.bytes that Fetches in progress hold (twice the records each may return, until its response is written)."}),
		fetchMemWaits: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_kafka_fetch_memory_waits_total",
			Help: "Fetches that found fetch.response.memory.bytes taken, by outcome: granted (after a wait within max_wait_ms) or denied (answered without records)."},
			[]string{"outcome"}),
	}
	m.fetchMemWaits.WithLabelValues("granted")
	m.fetchMemWaits.WithLabelValues("denied")
	for _, r := range closeReasons {
		m.closed.WithLabelValues(r)
	}
	for _, a := range served {
		name := apiName(a.key)
		m.bytesOut.WithLabelValues(name)
		for v := a.min; v <= a.max; v++ {
			m.requests.WithLabelValues(name, strconv.Itoa(int(v)))
		}
		// The codes of tierd's own failures, at 0 from the start, so
		// that alerts on them and absent() work before the first.
		m.errors.WithLabelValues(name, codeName(kerr.KafkaStorageError.Code))
		m.errors.WithLabelValues(name, codeName(kerr.UnknownServerError.Code))
	}
	return m
}

// countError counts one non-zero error code sent.
func (m *metrics) countError(api string, code int16) {
	if code == 0 {
		return
	}
	m.errors.WithLabelValues(api, codeName(code)).Inc()
}

// codeName is the Kafka name of an error code, e.g. OFFSET_OUT_OF_RANGE.
func codeName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return "CODE_" + strconv.Itoa(int(code))
}
