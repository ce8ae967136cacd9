package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
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
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/fetch"
	"github.com/tierd/tierd/internal/instance"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/saturate"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/logview"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsmapi"
)

// daemon is tierd's parts, wired: what "tierd run" and "tierd demo" share.
type daemon struct {
	store  *rlmm.Store
	bucket rsm.Bucket
	mgr    *rsm.Manager
	copier *copier.Copier
	fetch  *fetch.Server
	view   *logview.View   // both tiers joined, for the Kafka listener
	kafka  *cluster.Client // nil without kafka.bootstrap_servers
	reg    prometheus.Registerer
	watch  *bucketWatch    // the object store's verdict
	labels *partlabels.Set // bounds the per-partition series of every part
	rsmEP  *rsmapi.Server  // the RSM endpoint; nil unless rsm.enabled (tierd run)

	instanceID string // kept in the metadata dir
}

// openStore opens the metadata store, saying so when another tierd holds
// it; it gives up when ctx ends (SIGINT, SIGTERM).
func openStore(ctx context.Context, cfg config, opts ...rlmm.Option) (*rlmm.Store, error) {
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
func newDaemon(ctx context.Context, cfg config, log *slog.Logger, reg prometheus.Registerer, wrap ...func(rsm.Bucket) (rsm.Bucket, error)) (*daemon, error) {
	store, err := openStore(ctx, cfg, rlmm.WithRegisterer(reg), rlmm.WithLogger(log.With("component", "rlmm")))
	if err != nil {
		return nil, err
	}
	d := &daemon{store: store, reg: reg}
	if cfg.keepCreated { // before the instance id is kept: a metadata dir without one is new
		if cfg.Copier.MetadataCreatedMs, err = metadataCreated(cfg.Metadata.Dir, cfg.retentionGoAhead, time.Now(), log); err != nil {
			d.Close()
			return nil, err
		}
		noteInitialRetention(cfg, time.Now(), log)
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
	d.watch = newBucketWatch(d.bucket, cfg.Bucket.Prefix, cfg.Copier.Interval(), log.With("component", "bucket"), reg)
	d.bucket = d.watch.wrap(d.bucket)
	if d.mgr, err = rsm.NewManager(d.bucket, rsm.Config{Prefix: cfg.Bucket.Prefix}); err != nil {
		d.Close()
		return nil, err
	}
	labels := partlabels.New(cfg.Metrics.PartitionLabelsMax) // one bound for the copier's, fetch's and the RSM endpoint's series
	d.labels = labels
	copts := []copier.Option{copier.WithLogger(log.With("component", "copier")), copier.WithRegisterer(reg), copier.WithPartitionLabels(labels),
		copier.WithGate(d.environment)}
	if cfg.logDirCheck != nil {
		copts = append(copts, copier.WithLogDirCheck(cfg.logDirCheck))
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
	if d.fetch, err = fetch.NewServer(cfg.Fetch.Config, store, d.mgr, fetch.WithLogger(log.With("component", "fetch")), fetch.WithRegisterer(reg),
		fetch.WithAdmin(d.copier, store, identity(cfg, d.instanceID)),
		fetch.WithEngine(remoteread.WithMissingCopyHook(d.copier.SuspectCopy), remoteread.WithPartitionLabels(labels),
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
func (d *daemon) kafkaListener(cfg config, log *slog.Logger, advertised string, extra ...listener.Option) (*listener.Server, error) {
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

func (d *daemon) Close() error {
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
	cfg.retentionGoAhead = goAhead
	if err := checkLogDirs(cfg.Copier.LogDirs); err != nil {
		fmt.Fprintf(stderr, "tierd run: %v\n", err)
		return 1
	}
	if err := checkRecordedLogDirs(cfg.Metadata.Dir, cfg.Copier.LogDirs, newDirs); err != nil {
		fmt.Fprintf(stderr, "tierd run: %v\n", err)
		return 1
	}
	level := new(slog.LevelVar) // a reload sets it
	l, _ := parseLevel(cfg.LogLevel)
	level.Set(l)
	log, flush := newLogger(stderr, level)
	err := serve(ctx, cfg, log, level)
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

// memoryLimit is the Go soft memory limit for cfg, bytes (0: none): the
// configured one, or the fetch caches' budgets + the copier's multipart
// upload buffers (remote.log.manager.copier.thread.pool.size x
// part_size x part_concurrency) + the RSM endpoint's when it is on
// (rsm.max_concurrent_copies x the same) + 64 MiB for the rest. Without it the garbage collector lets the heap
// grow to twice what is live, so a full cache would double the footprint.
func memoryLimit(cfg config) int64 {
	switch {
	case cfg.MemoryLimitBytes > 0:
		return cfg.MemoryLimitBytes
	case cfg.MemoryLimitBytes < 0:
		return 0
	}
	var upload int64
	switch cfg.Bucket.Type {
	case "s3":
		upload = saturate.Mul(cfg.Bucket.S3.PartSize, int64(cfg.Bucket.S3.PartConcurrency))
	case "minio":
		upload = saturate.Mul(int64(min(cfg.Bucket.MinIO.PartSize, math.MaxInt64)), int64(cfg.Bucket.MinIO.PartConcurrency))
	}
	copies := int64(cfg.Copier.CopierThreadPoolSize)
	if cfg.RSM.Enabled {
		copies += int64(cfg.RSM.MaxConcurrentCopies)
	}
	return saturate.Add(saturate.Add(cfg.Fetch.MemoryBytes(), saturate.Mul(copies, upload)), 64<<20)
}

// serve runs the copier loop, the gRPC fetch server, the HTTP metrics
// server and the config reloader (SIGHUP) in one run group until ctx ends
// or one of them fails. level, when given, is the log handler's level,
// which a reload sets.
func serve(ctx context.Context, cfg config, log *slog.Logger, level ...*slog.LevelVar) error {
	hup := notifyHUP() // from here on SIGHUP reloads, never kills
	defer signal.Stop(hup)
	if limit := memoryLimit(cfg); limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
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
	cfg.logDirCheck = lock.Check
	tlsH, err := tlsHolder(cfg.TLS, log) // nil when every endpoint is plaintext
	if err != nil {
		return err
	}
	cfg.keepCreated = true
	d, err := newDaemon(ctx, cfg, log, reg)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := lock.Record(d.instanceID); err != nil {
		return fmt.Errorf("record this tierd in the log dirs' lock files: %w", err)
	}
	if err := recordLogDirs(cfg.Metadata.Dir, cfg.Copier.LogDirs); err != nil {
		return fmt.Errorf("record the log dirs tierd runs on: %w", err)
	}
	if err := writeRuntime(cfg.Metadata.Dir, runtimeInfo{PID: os.Getpid(), FetchListen: cfg.Fetch.Listen, HTTPListen: cfg.HTTP.Listen,
		StartedMs: time.Now().UnixMilli()}); err != nil {
		log.Warn("could not record where this tierd listens, for the tools", "file", filepath.Join(cfg.Metadata.Dir, runtimeFile), "err", err)
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
	if err := d.watch.check(ctx); errors.Is(err, rsm.ErrMisconfigured) {
		return err
	}
	d.watch.Probe(ctx)
	var g oklog.Group
	rl := newReloader(cfg, log, append(level, nil)[0])
	var acls *authz.Authorizer
	if cfg.ACLs.Source != "" {
		if acls, err = newAuthorizer(cfg, d, log); err != nil {
			return err
		}
		// The ACLs read again, at once: a file that does not load fails the
		// reload (the ACLs read before keep deciding, up to max_stale).
		rl.Register("acls", func(config) error { return acls.Load(ctx) })
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
	d.fetch.Configure(fetch.WithReadiness(d.readiness), fetch.WithTLS(serverTLS(tlsH, cfg.TLS.GRPC)),
		fetch.WithAuth(fetchAuth(cfg, tokens, acls)), fetch.WithAdminSocket(adminSocket(cfg)))
	rl.Register("copier", func(c config) error { return d.copier.Reconfigure(c.Copier) })
	rl.Register("fetch", func(c config) error { return d.fetch.Reconfigure(c.Fetch.Config) })
	limit := memoryLimit(cfg)
	rl.Register("memory limit", func(c config) error {
		if l := memoryLimit(c); l != limit {
			limit = l
			log.Info("go soft memory limit", "bytes", applyMemoryLimit(c))
		}
		return nil
	})
	rl.Register("tls", func(config) error { return reloadTLS(tlsH, log) }) // the certificate files, read again
	g.Add(func() error { return rl.run(ctx, hup) }, func(error) { cancel() })
	g.Add(func() error { return d.watch.Run(ctx) }, func(error) { cancel() })
	g.Add(func() error { return d.copier.Run(ctx) }, func(error) { cancel() })
	g.Add(func() error { return d.fetch.Run(ctx) }, func(error) { cancel() })
	if cfg.RSM.Enabled {
		if d.rsmEP, err = d.rsmEndpoint(cfg, log, serverTLS(tlsH, cfg.TLS.RSM)); err != nil {
			return err
		}
		rl.Register("rsm token", func(config) error { return d.rsmEP.ReloadToken() })
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
		g.Add(func() error {
			return serveHTTP(ctx, cfg.HTTP.Listen, reg, d.readiness, page, cfg.HTTP.Pprof, serverTLS(tlsH, cfg.TLS.HTTP), log, guard)
		}, func(error) { cancel() })
	}
	g.Add(func() error { <-ctx.Done(); return nil }, func(error) { cancel() })
	return g.Run()
}

// readiness says whether tierd is ready, and why not: the metadata store
// takes no writes, the object store did not answer its last probe, a log
// dir is missing or unreadable (copier.LogDirsReady), or the Kafka
// cluster (when configured) did not answer the last pass.
func (d *daemon) readiness() (bool, string) {
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
func (d *daemon) environment() error {
	if err := d.store.Health(); err != nil {
		return &copier.GateError{Reason: remotelog.WaitMetadataUnwritable, Err: err}
	}
	if err := d.watch.Err(); err != nil {
		return &copier.GateError{Reason: remotelog.WaitStoreUnreachable, Err: err}
	}
	return nil
}

// serveHTTP serves /metrics, /-/healthy, /-/ready, when page is not
// nil the status page at "/", and with prof Go's profiles under
// /debug/pprof/ (http.pprof), over TLS when tc is not nil. guard, when
// given, wraps all but /-/healthy and /-/ready (probes stay open; they
// say only ok or why not ready). The server's
// own errors (refused TLS handshakes among them) go to log at debug level.
func serveHTTP(ctx context.Context, addr string, reg *prometheus.Registry, ready func() (bool, string), page http.Handler, prof bool, tc *tls.Config, log *slog.Logger,
	guard ...func(http.Handler) http.Handler) error {
	mux := http.NewServeMux()
	guarded := http.NewServeMux() // what guard protects: the page, /metrics, the profiles
	if prof {
		handlePprof(guarded)
	}
	if page != nil {
		guarded.Handle("/{$}", page)
	}
	guarded.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	var h http.Handler = guarded
	for _, g := range guard {
		h = g(h)
	}
	mux.Handle("/", h)
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := ready(); !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("http: listen: %w", err)
	}
	if tc != nil {
		lis = tls.NewListener(lis, tc)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelDebug)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// rsmListen is rsm.listen, or "" when the RSM endpoint is off.
func rsmListen(cfg config) string {
	if !cfg.RSM.Enabled {
		return ""
	}
	return cfg.RSM.Listen
}
