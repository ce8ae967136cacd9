package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon/statuspage"
	"github.com/tierd/tierd/rsmapi"
)

// statusPage is the page served at http.listen "/" (package statuspage):
// the copier's status, the metadata store's rows and deletion journal,
// and cfg with its secrets redacted.
//
// live, when not nil, adds facts computed at each view (securityFacts).
func statusPage(cfg config.Config, d *Parts, log *slog.Logger, ready func() (bool, string), rl *Reloader, live func() []statuspage.Fact) (*statuspage.Page, error) {
	// The page shows the running config: a reload (SIGHUP) replaces it,
	// with where each value came from.
	var cur atomic.Pointer[config.Config]
	cur.Store(&cfg)
	if rl != nil {
		rl.Register("status page", func(c config.Config) error { cur.Store(&c); return nil })
	}
	running := func() any { return *cur.Load() }
	source := func(key string) string { return cur.Load().Source(key) }
	var broker []statuspage.Option
	if live != nil {
		broker = append(broker, statuspage.WithLiveFacts(live))
	}
	if d.RSM != nil {
		broker = append(broker, statuspage.WithBrokerCopies(func() (statuspage.BrokerCopies, error) { return BrokerCopiesView(d.RSM.Status()) }))
	}
	return statuspage.New(statuspage.DefaultConfig(), d.Copier, d.Store, append(broker,
		statuspage.WithLogger(log.With("component", "statuspage")),
		statuspage.WithEffectiveConfig(running, source),
		statuspage.WithReadiness(ready),
		statuspage.WithFacts(
			statuspage.Fact{Name: "instance id", Value: d.InstanceID},
			statuspage.Fact{Name: "broker id", Value: fmt.Sprint(cfg.Copier.BrokerID)},
			statuspage.Fact{Name: "log dirs", Value: strings.Join(cfg.Copier.LogDirs, ", ")},
			statuspage.Fact{Name: "bucket", Value: d.Bucket.Name()},
			statuspage.Fact{Name: "metadata dir", Value: cfg.Metadata.Dir},
		))...)
}

// BrokerCopiesView is the status page's section of broker-owned copies
// from the endpoint's status.
func BrokerCopiesView(st rsmapi.Status) (statuspage.BrokerCopies, error) {
	scheme := "http"
	if st.TLS {
		scheme = "https"
	}
	b := statuspage.BrokerCopies{Endpoint: scheme + "://" + st.Listen, Prefix: st.Prefix, InFlight: st.CopiesInFlight, Stored: st.Stored,
		StoredBytes: st.StoredBytes, Unfinished: st.Unfinished, Copies: st.Copies, CopyErrors: st.CopyErrors, Fetches: st.Fetches,
		FetchErrors: st.FetchErrors, Deletes: st.Deletes, DeleteErrors: st.DeleteErrors, AuthFailures: st.AuthFailures,
		LastError: st.LastError, LastErrorMs: st.LastErrorMs}
	for _, p := range st.Partitions {
		b.Partitions = append(b.Partitions, statuspage.BrokerPartition{Topic: p.Topic, Partition: p.Partition, Stored: p.Stored, Bytes: p.Bytes,
			StartOffset: p.StartOffset, EndOffset: p.EndOffset, Started: p.Started, Deleting: p.Deleting, LastCopyMs: p.LastCopyMs})
	}
	if st.CatalogueError != "" {
		return b, errors.New(st.CatalogueError)
	}
	return b, nil
}
