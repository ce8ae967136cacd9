package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	oklog "github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/instance"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/logview"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsmapi"
)

// tierdParts is tierd's parts, wired: what "tierd run" and "tierd demo" share.
type tierdParts struct {
	store  *rlmm.Store
	bucket rsm.Bucket
	mgr    *rsm.Manager
	copier *copier.Copier
	fetch  *grpcapi.Server
	view   *logview.View   // both tiers joined, for the Kafka listener
	kafka  *cluster.Client // nil without kafka.bootstrap_servers
	reg    prometheus.Registerer
	watch  *rsm.Watch      // the object store's verdict
	labels *partlabels.Set // bounds the per-partition series of every part
	rsmEP  *rsmapi.Server  // the RSM endpoint; nil unless rsm.enabled (tierd run)

	instanceID string // kept in the metadata dir
}

// startOptions are what tierd run adds at start to the config it read.
type startOptions struct {
	// keepCreated: tierd run keeps the metadata dir's creation time
	// (copier.Config.MetadataCreatedMs, see daemon.MetadataCreated); the tools
	// and the demo do not. retentionGoAhead is tierd run
	// --retention-go-ahead.
	keepCreated, retentionGoAhead bool
	// logDirCheck, set by tierd run, says whether a log dir is still the
	// one it locked at start (copier.WithLogDirCheck); nil: no check.
	logDirCheck func(dir string) error
}

// openStore opens the metadata store, saying so when another tierd holds
// it; it gives up when ctx ends (SIGINT, SIGTERM).
func openStore(ctx context.Context, cfg config.Config, opts ...rlmm.Option) (*rlmm.Store, error) {
	s, err := rlmm.OpenContext(ctx, cfg.Metadata, opts...)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		return nil, &stopError{dir: cfg.Metadata.Dir}
	}
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("metadata dir %s is locked: another tierd is using it (%w)", cfg.Metadata.Dir, err)
	}
	return s, err
}

// newDaemon wires tierd's parts for cfg. wrap, when given, decorates the
// bucket before anything uses it (the demo confines itself to its own
// prefix this way).
func newDaemon(ctx context.Context, cfg config.Config, start startOptions, log *slog.Logger, reg prometheus.Registerer, wrap ...func(rsm.Bucket) (rsm.Bucket, error)) (*tierdParts, error) {
	store, err := openStore(ctx, cfg, rlmm.WithRegisterer(reg), rlmm.WithLogger(log.With("component", "rlmm")))
	if err != nil {
		return nil, err
	}
	d := &tierdParts{store: store, reg: reg}
	if start.keepCreated { // before the instance id is kept: a metadata dir without one is new
		if cfg.Copier.MetadataCreatedMs, err = daemon.MetadataCreated(cfg.Metadata.Dir, start.retentionGoAhead, time.Now(), log); err != nil {
			d.Close()
			return nil, err
		}
		daemon.NoteInitialRetention(cfg, time.Now(), log)
	}
	// The instance id lives in the metadata dir; when that was lost, the
	// log dirs' lock files still name it.
	id, source, err := instance.Load(cfg.Metadata.Dir, instance.Recorded(cfg.Copier.LogDirs))
	if err != nil {
		d.Close()
		return nil, err
	}
	log.Info("instance id", "instance_id", id, "from", source, "broker_id", cfg.Copier.BrokerID)
	d.instanceID, cfg.Copier.InstanceID = id, id
	if d.bucket, err = openBucket(ctx, cfg.Bucket); err != nil {
		d.Close()
		return nil, err
	}
	for _, w := range wrap {
		b, err := w(d.bucket)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.bucket = b
	}
	d.watch = rsm.NewWatch(d.bucket, cfg.Bucket.Prefix, cfg.Copier.Interval(), log.With("component", "bucket"), reg)
	d.bucket = d.watch.Wrap(d.bucket)
	if d.mgr, err = rsm.NewManager(d.bucket, rsm.Config{Prefix: cfg.Bucket.Prefix}); err != nil {
		d.Close()
		return nil, err
	}
	labels := partlabels.New(cfg.Metrics.PartitionLabelsMax) // one bound for the copier's, fetch's and the RSM endpoint's series
	d.labels = labels
	copts := []copier.Option{copier.WithLogger(log.With("component", "copier")), copier.WithRegisterer(reg), copier.WithPartitionLabels(labels),
		copier.WithGate(d.environment)}
	if start.logDirCheck != nil {
		copts = append(copts, copier.WithLogDirCheck(start.logDirCheck))
	}
	if cfg.Kafka.Cluster.Enabled() {
		if d.kafka, err = cluster.New(cfg.Kafka.Cluster, cluster.WithLogger(log.With("component", "kafka"))); err != nil {
			d.Close()
			return nil, err
		}
		copts = append(copts, copier.WithCluster(d.kafka))
	}
	if d.copier, err = copier.New(cfg.Copier, store, d.mgr, copts...); err != nil {
		d.Close()
		return nil, err
	}
	if d.fetch, err = grpcapi.NewServer(cfg.Fetch.Config, store, d.mgr, grpcapi.WithLogger(log.With("component", "fetch")), grpcapi.WithRegisterer(reg),
		grpcapi.WithAdmin(d.copier, store, identity(cfg, d.instanceID)),
		grpcapi.WithEngine(remoteread.WithMissingCopyHook(d.copier.SuspectCopy), remoteread.WithPartitionLabels(labels),
			remoteread.WithStoreHealth(d.watch.Err))); err != nil {
		d.Close()
		return nil, err
	}
	vcfg := logview.DefaultConfig()
	vcfg.LogDirs, vcfg.BrokerOwned = cfg.Copier.LogDirs, viewBrokerOwned(cfg.Copier)
	if d.view, err = logview.New(vcfg, d.fetch.Engine(), logview.WithLogger(log.With("component", "logview"))); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// kafkaListener returns the Kafka protocol listener over both tiers, its
// node id tierd's broker_id (0 when unset) and its cluster id the Kafka
// cluster's recorded one, else one naming this tierd. advertised, when
// set, replaces the configured advertised address.
func (d *tierdParts) kafkaListener(cfg config.Config, log *slog.Logger, advertised string, extra ...listener.Option) (*listener.Server, error) {
	lc := cfg.Kafka.Listener
	if advertised != "" {
		lc.Advertised = advertised
	}
	node := max(cfg.Copier.BrokerID, 0)
	clusterID, err := d.store.ClusterID()
	if err != nil {
		return nil, err
	}
	if clusterID == "" {
		clusterID = "tierd-" + d.instanceID
	}
	return listener.New(lc, d.view, append([]listener.Option{listener.WithLogger(log.With("component", "kafka-listener")), listener.WithRegisterer(d.reg),
		listener.WithNodeID(node), listener.WithClusterID(clusterID)}, extra...)...)
}

// viewBrokerOwned says whether the Kafka listener bounds local reads by
// the broker's high watermark (logview.Config.BrokerOwned): when a
// broker owns, or may own, any of the log dirs at start.
func viewBrokerOwned(c copier.Config) bool {
	for _, st := range c.ProbeLogDirs(nil) {
		if st.BrokerOwned && st.Available {
			return true
		}
	}
	return false
}

// brokerOwnedText is the broker_owned setting as the start line says it.
func brokerOwnedText(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}

func (d *tierdParts) Close() error {
	if d.kafka != nil {
		d.kafka.Close()
	}
	var errs []error
	if d.bucket != nil {
		errs = append(errs, d.bucket.Close())
	}
	return errors.Join(append(errs, d.store.Close())...)
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var goAhead bool
	var newDirs stringList
	cfg, code, ok := configCommand("run", "tierd run --config tierd.yaml [--retention-go-ahead] [--new-log-dir DIR ...]", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&goAhead, "retention-go-ahead", false, "let retention delete at once on a new metadata dir, without waiting for "+
			"copier.initial_retention_delay (recorded in the metadata dir: it holds for later starts too)")
		fs.Var(&newDirs, "new-log-dir", "a log dir of copier.log_dirs that tierd ran on before and that lost tierd's lock file on purpose "+
			"(a new disk, partitions moved away): start anyway (repeatable)")
	})
	if !ok {
		return code
	}
	if err := checkLogDirs(cfg.Copier.LogDirs); err != nil {
		fmt.Fprintf(stderr, "tierd run: %v\n", err)
		return 1
	}
	if err := daemon.CheckRecordedLogDirs(cfg.Metadata.Dir, cfg.Copier.LogDirs, newDirs); err != nil {
		fmt.Fprintf(stderr, "tierd run: %v\n", err)
		return 1
	}
	level := new(slog.LevelVar) // a reload sets it
	l, _ := config.ParseLevel(cfg.LogLevel)
	level.Set(l)
	log, flush := newLogger(stderr, level)
	err := serve(ctx, cfg, startOptions{retentionGoAhead: goAhead}, log, level)
	flush() // held-back repeats before the last line, not after it
	return stopped(ctx, log, err)
}

// stopError is what openStore returns when a stop (SIGTERM, SIGINT)
// interrupted it: dir is the metadata dir.
type stopError struct{ dir string }

func (e *stopError) Error() string { return "stopped while opening the metadata store " + e.dir }

// stopped logs how "tierd run" ended and returns its exit code: 0 when
// it ended without an error or because a stop was requested (SIGTERM,
// SIGINT) before it was serving, 1 otherwise.
func stopped(ctx context.Context, log *slog.Logger, err error) int {
	switch {
	case err == nil:
		log.Info("tierd stopped")
	case errors.As(err, new(*stopError)):
		var se *stopError
		errors.As(err, &se)
		log.Info("tierd stopped while opening the metadata store", "dir", se.dir)
	case ctx.Err() != nil && errors.Is(err, context.Cause(ctx)):
		log.Info("tierd stopped before it was serving", "while", err.Error())
	default:
		log.Error("tierd stopped", "err", err)
		return 1
	}
	return 0
}

// checkLogDirs refuses log dirs that do not exist or that are partition
// directories themselves (a common slip: log_dirs takes the parent).
func checkLogDirs(dirs []string) error {
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

// serve runs the copier loop, the gRPC fetch server, the HTTP metrics
// server and the config reloader (SIGHUP) in one run group until ctx ends
// or one of them fails. level, when given, is the log handler's level,
// which a reload sets.
func serve(ctx context.Context, cfg config.Config, start startOptions, log *slog.Logger, level ...*slog.LevelVar) error {
	hup := daemon.NotifyHUP() // from here on SIGHUP reloads, never kills
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
	start.logDirCheck = lock.Check
	tlsH, err := tlsHolder(cfg.TLS, log) // nil when every endpoint is plaintext
	if err != nil {
		return err
	}
	start.keepCreated = true
	d, err := newDaemon(ctx, cfg, start, log, reg)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := lock.Record(d.instanceID); err != nil {
		return fmt.Errorf("record this tierd in the log dirs' lock files: %w", err)
	}
	if err := daemon.RecordLogDirs(cfg.Metadata.Dir, cfg.Copier.LogDirs); err != nil {
		return fmt.Errorf("record the log dirs tierd runs on: %w", err)
	}
	if err := daemon.WriteRuntime(cfg.Metadata.Dir, daemon.Runtime{PID: os.Getpid(), FetchListen: cfg.Fetch.Listen, HTTPListen: cfg.HTTP.Listen,
		StartedMs: time.Now().UnixMilli()}); err != nil {
		log.Warn("could not record where this tierd listens, for the tools", "file", filepath.Join(cfg.Metadata.Dir, daemon.RuntimeFile), "err", err)
	}
	log.Info("tierd starting", "log_dirs", cfg.Copier.LogDirs, "bucket", d.bucket.Name(), "metadata", cfg.Metadata.Dir,
		"fetch", cfg.Fetch.Listen, "kafka_listeners", kafkaListenersText(cfg), "http", cfg.HTTP.Listen, "broker_owned", brokerOwnedText(cfg.Copier.BrokerOwned),
		"rsm_listen", rsmListen(cfg))
	d.copier.ProbeLogDirs() // says, for each log dir, whether tierd may delete local files there
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A bucket that does not exist or credentials the store refuses will
	// not mend by themselves: say so and stop. An unreachable store may:
	// wait for it, not ready.
	if err := d.watch.Check(ctx); errors.Is(err, rsm.ErrMisconfigured) {
		return err
	}
	d.watch.Probe(ctx)
	var g oklog.Group
	rl := daemon.NewReloader(cfg, log, append(level, nil)[0])
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
	d.fetch.Configure(grpcapi.WithReadiness(d.readiness), grpcapi.WithTLS(serverTLS(tlsH, cfg.TLS.GRPC)),
		grpcapi.WithAuth(fetchAuth(cfg, tokens, acls)), grpcapi.WithAdminSocket(adminSocket(cfg)))
	rl.Register("copier", func(c config.Config) error { return d.copier.Reconfigure(c.Copier) })
	rl.Register("fetch", func(c config.Config) error { return d.fetch.Reconfigure(c.Fetch.Config) })
	limit := cfg.MemoryLimit()
	rl.Register("memory limit", func(c config.Config) error {
		if l := c.MemoryLimit(); l != limit {
			limit = l
			log.Info("go soft memory limit", "bytes", daemon.ApplyMemoryLimit(c))
		}
		return nil
	})
	rl.Register("tls", func(config.Config) error { return reloadTLS(tlsH, log) }) // the certificate files, read again
	g.Add(func() error { return rl.Run(ctx, hup) }, func(error) { cancel() })
	g.Add(func() error { return d.watch.Run(ctx) }, func(error) { cancel() })
	g.Add(func() error { return d.copier.Run(ctx) }, func(error) { cancel() })
	g.Add(func() error { return d.fetch.Run(ctx) }, func(error) { cancel() })
	if cfg.RSM.Enabled {
		if d.rsmEP, err = d.rsmEndpoint(cfg, log, serverTLS(tlsH, cfg.TLS.RSM)); err != nil {
			return err
		}
		rl.Register("rsm token", func(config.Config) error { return d.rsmEP.ReloadToken() })
		g.Add(func() error { return d.rsmEP.Run(ctx) }, func(error) { cancel() })
	}
	kls, err := d.kafkaListeners(cfg, log, rl, tlsH, acls)
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
		srv := daemon.HTTP{Addr: cfg.HTTP.Listen, Registry: reg, Ready: d.readiness, Page: page, Pprof: cfg.HTTP.Pprof,
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
func (d *tierdParts) readiness() (bool, string) {
	if err := d.store.Health(); err != nil {
		return false, err.Error()
	}
	if ok, why := d.watch.Ready(); !ok {
		return false, why
	}
	if ok, why := d.copier.LogDirsReady(); !ok {
		return false, why
	}
	return d.copier.ClusterStatus()
}

// environment returns why copying must wait, nil when it may go on: the
// metadata store takes no writes (metadata_unwritable), or the bucket
// watch says the object store does not answer (store_unreachable), as a
// *copier.GateError carrying the partitions' wait reason.
func (d *tierdParts) environment() error {
	if err := d.store.Health(); err != nil {
		return &copier.GateError{Reason: remotelog.WaitMetadataUnwritable, Err: err}
	}
	if err := d.watch.Err(); err != nil {
		return &copier.GateError{Reason: remotelog.WaitStoreUnreachable, Err: err}
	}
	return nil
}

// rsmListen is rsm.listen, or "" when the RSM endpoint is off.
func rsmListen(cfg config.Config) string {
	if !cfg.RSM.Enabled {
		return ""
	}
	return cfg.RSM.Listen
}
