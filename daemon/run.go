package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	oklog "github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/instance"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/rsm"
)

// Options are what "tierd run" passes to Run besides the config.
type Options struct {
	// Log receives every part's log lines (required).
	Log *slog.Logger
	// Level is Log's handler level, which a reload sets from log_level;
	// nil: a reload leaves the level alone.
	Level *slog.LevelVar
	// RetentionGoAhead is tierd run --retention-go-ahead: retention may
	// delete at once on a new metadata dir (recorded there).
	RetentionGoAhead bool
}

// CheckLogDirs refuses log dirs that do not exist or that are partition
// directories themselves (a common slip: log_dirs takes the parent).
func CheckLogDirs(dirs []string) error {
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			return fmt.Errorf("copier: log_dirs: %w", err)
		}
		for _, e := range ents {
			if f, ok := kafkalog.ParseFileName(e.Name()); ok && f.Suffix == kafkalog.LogSuffix {
				return fmt.Errorf("copier: log_dirs: %s holds segment files: it is a partition directory; give its parent (the Kafka log.dir)", d)
			}
		}
	}
	return nil
}

// Run is "tierd run": it locks the log dirs (one tierd each), opens the
// parts (OpenParts) and runs the bucket watch, the copier, the gRPC API,
// the RSM endpoint, the Kafka listeners, the HTTP endpoint and the config
// reloader (SIGHUP, "tierd config reload") in one run group until ctx
// ends (nil) or one of them fails (its error). A stop while the metadata
// store is still opening returns *StopError; a bucket that does not exist
// or credentials the store refuses return rsm.ErrMisconfigured.
func Run(ctx context.Context, cfg config.Config, o Options) error {
	log := o.Log
	start := PartsOptions{RetentionGoAhead: o.RetentionGoAhead}
	hup := NotifyHUP() // from here on SIGHUP reloads, never kills
	defer signal.Stop(hup)
	if limit := cfg.MemoryLimit(); limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
		log.Info("go soft memory limit", "bytes", limit)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// One tierd per log dir: another one (with another metadata dir)
	// would copy the same partitions.
	lock, err := instance.LockDirs(cfg.Copier.LogDirs)
	if err != nil {
		return err
	}
	defer lock.Close()
	start.LogDirCheck = lock.Check
	tlsH, err := tlsHolder(cfg.TLS, log) // nil when every endpoint is plaintext
	if err != nil {
		return err
	}
	start.KeepCreated = true
	d, err := OpenParts(ctx, cfg, start, log, reg)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := lock.Record(d.InstanceID); err != nil {
		return fmt.Errorf("record this tierd in the log dirs' lock files: %w", err)
	}
	if err := RecordLogDirs(cfg.Metadata.Dir, cfg.Copier.LogDirs); err != nil {
		return fmt.Errorf("record the log dirs tierd runs on: %w", err)
	}
	if err := WriteRuntime(cfg.Metadata.Dir, Runtime{PID: os.Getpid(), FetchListen: cfg.Fetch.Listen, HTTPListen: cfg.HTTP.Listen,
		StartedMs: time.Now().UnixMilli()}); err != nil {
		log.Warn("could not record where this tierd listens, for the tools", "file", filepath.Join(cfg.Metadata.Dir, RuntimeFile), "err", err)
	}
	log.Info("tierd starting", "log_dirs", cfg.Copier.LogDirs, "bucket", d.Bucket.Name(), "metadata", cfg.Metadata.Dir,
		"fetch", cfg.Fetch.Listen, "kafka_listeners", kafkaListenersText(cfg), "http", cfg.HTTP.Listen, "broker_owned", brokerOwnedText(cfg.Copier.BrokerOwned),
		"rsm_listen", rsmListen(cfg), "new_copies", objectsText(cfg.Objects))
	d.Copier.ProbeLogDirs() // says, for each log dir, whether tierd may delete local files there
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A bucket that does not exist or credentials the store refuses will
	// not mend by themselves: say so and stop. An unreachable store may:
	// wait for it, not ready.
	if err := d.Watch.Check(ctx); errors.Is(err, rsm.ErrMisconfigured) {
		return err
	}
	d.Watch.Probe(ctx)
	var g oklog.Group
	rl := NewReloader(cfg, log, o.Level)
	var acls *authz.Authorizer
	if cfg.ACLs.Source != "" {
		if acls, err = newAuthorizer(cfg, d, log); err != nil {
			return err
		}
		// The ACLs read again, at once: a file that does not load fails the
		// reload (the ACLs read before keep deciding, up to max_stale).
		rl.Register("acls", func(config.Config) error { return acls.Load(ctx) })
		g.Add(func() error { return acls.Run(ctx) }, func(error) { cancel() })
	}
	var tokens *apiTokens
	if cfg.Fetch.Auth.TokensFile != "" {
		if tokens, err = newAPITokens(cfg.Fetch.Auth.TokensFile, "fetch: tokens_file"); err != nil {
			return err
		}
		rl.Register("api tokens", tokens.reload)
	}
	warnOpenAPI(cfg, log, acls != nil)
	d.API.Configure(grpcapi.WithReadiness(d.readiness), grpcapi.WithTLS(serverTLS(tlsH, cfg.TLS.GRPC)),
		grpcapi.WithAuth(fetchAuth(cfg, tokens, acls)), grpcapi.WithAdminSocket(AdminSocket(cfg)))
	rl.Register("copier", func(c config.Config) error { return d.Copier.Reconfigure(c.Copier) })
	rl.Register("fetch", func(c config.Config) error { return d.API.Reconfigure(c.Fetch.Config) })
	limit := cfg.MemoryLimit()
	rl.Register("memory limit", func(c config.Config) error {
		if l := c.MemoryLimit(); l != limit {
			limit = l
			log.Info("go soft memory limit", "bytes", ApplyMemoryLimit(c))
		}
		return nil
	})
	rl.Register("tls", func(config.Config) error { return reloadTLS(tlsH, log) }) // the certificate files, read again
	g.Add(func() error { return rl.Run(ctx, hup) }, func(error) { cancel() })
	g.Add(func() error { return d.Watch.Run(ctx) }, func(error) { cancel() })
	g.Add(func() error { return d.Copier.Run(ctx) }, func(error) { cancel() })
	g.Add(func() error { return d.API.Run(ctx) }, func(error) { cancel() })
	if cfg.RSM.Enabled {
		if d.RSM, err = d.rsmEndpoint(cfg, log, serverTLS(tlsH, cfg.TLS.RSM)); err != nil {
			return err
		}
		rl.Register("rsm token", func(config.Config) error { return d.RSM.ReloadToken() })
		g.Add(func() error { return d.RSM.Run(ctx) }, func(error) { cancel() })
	}
	var shared []listener.Option
	switch {
	case d.Groups != nil:
		g.Add(func() error { return d.Groups.Run(ctx) }, func(error) { cancel() })
		shared = append(shared, listener.WithGroups(d.Groups))
	case GroupsWhere(cfg) == listener.GroupsCluster && d.Kafka != nil:
		shared = append(shared, listener.WithGroupForwarding(d.Kafka))
	}
	kls, err := d.kafkaListeners(cfg, log, rl, tlsH, acls, shared...)
	if err != nil {
		return err
	}
	for _, kl := range kls {
		g.Add(func() error { return kl.Run(ctx) }, func(error) { cancel() })
	}
	if cfg.HTTP.Listen != "" {
		guard := func(h http.Handler) http.Handler { return h }
		var ht *apiTokens
		if cfg.HTTP.TokensFile != "" {
			if ht, err = newAPITokens(cfg.HTTP.TokensFile, "http: tokens_file"); err != nil {
				return err
			}
			rl.Register("http tokens", ht.reload)
			guard = func(h http.Handler) http.Handler { return requireToken(ht, h) }
		}
		page, err := statusPage(cfg, d, log, d.readiness, rl, securityFacts(cfg, acls, tokens, ht))
		if err != nil {
			return err
		}
		srv := HTTP{Addr: cfg.HTTP.Listen, Registry: reg, Ready: d.readiness, Page: page, Pprof: cfg.HTTP.Pprof,
			TLS: serverTLS(tlsH, cfg.TLS.HTTP), Guard: guard, Log: log}
		g.Add(func() error { return srv.Run(ctx) }, func(error) { cancel() })
	}
	g.Add(func() error { <-ctx.Done(); return nil }, func(error) { cancel() })
	return g.Run()
}

// readiness says whether tierd is ready, and why not: the metadata store
// takes no writes, the object store did not answer its last probe, a log
// dir is missing or unreadable (copier.LogDirsReady), or the Kafka
// cluster (when configured) did not answer the last pass.
func (d *Parts) readiness() (bool, string) {
	if err := d.Store.Health(); err != nil {
		return false, err.Error()
	}
	if ok, why := d.Watch.Ready(); !ok {
		return false, why
	}
	if ok, why := d.Copier.LogDirsReady(); !ok {
		return false, why
	}
	return d.Copier.ClusterStatus()
}

// environment returns why copying must wait, nil when it may go on: the
// metadata store takes no writes (metadata_unwritable), or the bucket
// watch says the object store does not answer (store_unreachable), as a
// *copier.GateError carrying the partitions' wait reason.
func (d *Parts) environment() error {
	if err := d.Store.Health(); err != nil {
		return &copier.GateError{Reason: remotelog.WaitMetadataUnwritable, Err: err}
	}
	if err := d.Watch.Err(); err != nil {
		return &copier.GateError{Reason: remotelog.WaitStoreUnreachable, Err: err}
	}
	return nil
}

// rsmListen is rsm.listen, or "" when the RSM endpoint is off.
// objectsText says how new copies are stored, for the start line: "as
// they came", or the chunked form's transforms, chunk size and the KEKs.
func objectsText(o config.Objects) string {
	if !o.Chunked() {
		return "as they came (objects: compression and encryption off)"
	}
	var parts []string
	if o.Compression {
		parts = append(parts, fmt.Sprintf("zstd level %d", o.CompressionLevel))
	}
	if o.Encryption {
		parts = append(parts, fmt.Sprintf("AES-256-GCM under KEK %q", o.CurrentKeyID()))
	}
	text := fmt.Sprintf("chunked (%s), %d-byte chunks", strings.Join(parts, ", "), o.ChunkBytes)
	if ids := slices.Sorted(maps.Keys(o.EncryptionKeys)); len(ids) > 0 {
		text += "; KEKs listed: " + strings.Join(ids, ", ")
	}
	return text
}

func rsmListen(cfg config.Config) string {
	if !cfg.RSM.Enabled {
		return ""
	}
	return cfg.RSM.Listen
}
