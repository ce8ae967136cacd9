package main

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/daemon/statuspage"
)

// statusPage is the page served at http.listen "/" (package statuspage):
// the copier's status, the metadata store's rows and deletion journal,
// and cfg with its secrets redacted.
//
// live, when not nil, adds facts computed at each view (securityFacts).
func statusPage(cfg config.Config, d *tierdParts, log *slog.Logger, ready func() (bool, string), rl *daemon.Reloader, live func() []statuspage.Fact) (*statuspage.Page, error) {
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
	if d.rsmEP != nil {
		broker = append(broker, statuspage.WithBrokerCopies(func() (statuspage.BrokerCopies, error) { return brokerCopiesView(d.rsmEP.Status()) }))
	}
	return statuspage.New(statuspage.DefaultConfig(), d.copier, d.store, append(broker,
		statuspage.WithLogger(log.With("component", "statuspage")),
		statuspage.WithEffectiveConfig(running, source),
		statuspage.WithReadiness(ready),
		statuspage.WithFacts(
			statuspage.Fact{Name: "instance id", Value: d.instanceID},
			statuspage.Fact{Name: "broker id", Value: fmt.Sprint(cfg.Copier.BrokerID)},
			statuspage.Fact{Name: "log dirs", Value: strings.Join(cfg.Copier.LogDirs, ", ")},
			statuspage.Fact{Name: "bucket", Value: d.bucket.Name()},
			statuspage.Fact{Name: "metadata dir", Value: cfg.Metadata.Dir},
		))...)
}
