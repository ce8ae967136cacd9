package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/tierd/tierd/statuspage"
)

// statusPage is the page served at http.listen "/" (package statuspage):
// the copier's status, the metadata store's rows and deletion journal,
// and cfg with its secrets redacted.
func statusPage(cfg config, d *daemon, log *slog.Logger, ready func() (bool, string)) (*statuspage.Page, error) {
	// TODO(lead, issue 11): once the running config can change (SIGHUP
	// reload) and knows each value's source ("tierd config show"), pass
	// the reloader's current config and that source function here instead
	// of the config tierd started with and nil.
	running := func() any { return cfg }
	return statuspage.New(statuspage.DefaultConfig(), d.copier, d.store,
		statuspage.WithLogger(log.With("component", "statuspage")),
		statuspage.WithEffectiveConfig(running, nil),
		statuspage.WithReadiness(ready),
		statuspage.WithFacts(
			statuspage.Fact{Name: "instance id", Value: d.instanceID},
			statuspage.Fact{Name: "broker id", Value: fmt.Sprint(cfg.Copier.BrokerID)},
			statuspage.Fact{Name: "log dirs", Value: strings.Join(cfg.Copier.LogDirs, ", ")},
			statuspage.Fact{Name: "bucket", Value: d.bucket.Name()},
			statuspage.Fact{Name: "metadata dir", Value: cfg.Metadata.Dir},
		))
}
