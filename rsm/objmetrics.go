package rsm

import (
	"errors"
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/rsm/chunked"
)

// ObjectMetrics counts what the chunked form does: chunks by compression
// outcome, original and stored bytes written, and encryption failures by
// reason. Config.Metrics injects it; nil counts nothing.
type ObjectMetrics struct {
	chunks             *prometheus.CounterVec
	original, stored   prometheus.Counter
	encryptionFailures *prometheus.CounterVec
}

// Reasons of tierd_objects_encryption_failures_total.
const (
	failKeyUnavailable = "key_unavailable" // the copy's KEK is not listed
	failWrongKey       = "wrong_key"       // the data key does not unwrap
	failManifestAuth   = "manifest_auth"   // the manifest's MAC (or digest) fails
	failWrap           = "wrap"            // a new data key could not be wrapped
	failChunk          = "chunk"           // a sealed chunk does not open (damaged or changed)
)

// NewObjectMetrics registers the metrics with reg.
func NewObjectMetrics(reg prometheus.Registerer) *ObjectMetrics {
	f := promauto.With(reg)
	m := &ObjectMetrics{
		chunks: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_objects_chunks_total",
			Help: "Chunks written in chunked form, by compression outcome: compressed, skipped_by_sample (the heuristic's 64 KiB sample did not compress), skipped_no_gain (compressed, saved under 1/16), not_compressing (compression off)."},
			[]string{"outcome"}),
		original: f.NewCounter(prometheus.CounterOpts{Name: "tierd_objects_original_bytes_total",
			Help: "Original bytes of the objects written in chunked form."}),
		stored: f.NewCounter(prometheus.CounterOpts{Name: "tierd_objects_stored_bytes_total",
			Help: "Stored bytes of the objects written in chunked form (compressed, sealed, with nonces and tags)."}),
		encryptionFailures: f.NewCounterVec(prometheus.CounterOpts{Name: "tierd_objects_encryption_failures_total",
			Help: "Encrypted copies that could not be written or read, by reason: key_unavailable (its KEK is not in objects.encryption.keys), wrong_key (the data key does not unwrap), manifest_auth (the manifest's MAC or digest fails), wrap (a new data key could not be wrapped), chunk (a sealed chunk does not open)."},
			[]string{"reason"}),
	}
	for o := chunked.NotCompressing; o <= chunked.SkippedByNoGain; o++ {
		m.chunks.WithLabelValues(o.String())
	}
	for _, r := range []string{failKeyUnavailable, failWrongKey, failManifestAuth, failWrap, failChunk} {
		m.encryptionFailures.WithLabelValues(r)
	}
	return m
}

// wrote counts one object written in chunked form.
func (om *ObjectMetrics) wrote(e *chunked.Encoder, stored int64) {
	if om == nil {
		return
	}
	e.Outcomes(func(o chunked.Outcome, n int) { om.chunks.WithLabelValues(o.String()).Add(float64(n)) })
	om.original.Add(float64(e.OriginalSize()))
	om.stored.Add(float64(stored))
}

// failed counts err when it is an encryption failure, and returns it.
func (om *ObjectMetrics) failed(err error, encrypted bool) error {
	if om == nil || err == nil {
		return err
	}
	switch {
	case errors.Is(err, chunked.ErrKeyUnavailable):
		om.encryptionFailures.WithLabelValues(failKeyUnavailable).Inc()
	case errors.Is(err, chunked.ErrWrongKey):
		om.encryptionFailures.WithLabelValues(failWrongKey).Inc()
	case errors.Is(err, chunked.ErrBadMAC):
		om.encryptionFailures.WithLabelValues(failManifestAuth).Inc()
	case encrypted && errors.Is(err, chunked.ErrDamaged):
		om.encryptionFailures.WithLabelValues(failChunk).Inc()
	}
	return err
}

// failedWrap counts a data key that could not be wrapped.
func (om *ObjectMetrics) failedWrap() {
	if om != nil {
		om.encryptionFailures.WithLabelValues(failWrap).Inc()
	}
}

// countedReader counts the first encryption failure its reads return.
type countedReader struct {
	r         io.Reader
	om        *ObjectMetrics
	encrypted bool
	counted   bool
}

func (c *countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF && !c.counted {
		c.counted = true
		c.om.failed(err, c.encrypted)
	}
	return n, err
}
