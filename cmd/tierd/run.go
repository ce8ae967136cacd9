package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	oklog "github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/fetch"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
)

// daemon is tierd's parts, wired: what "tierd run" and "tierd demo" share.
type daemon struct {
	store  *rlmm.Store
	bucket rsm.Bucket
	mgr    *rsm.Manager
	copier *copier.Copier
	fetch  *fetch.Server
}

func newDaemon(ctx context.Context, cfg config, log *slog.Logger, reg prometheus.Registerer) (*daemon, error) {
	store, err := rlmm.Open(cfg.Metadata, rlmm.WithRegisterer(reg), rlmm.WithLogger(log.With("component", "rlmm")))
	if err != nil {
		return nil, err
	}
	d := &daemon{store: store}
	if d.bucket, err = openBucket(ctx, cfg.Bucket); err != nil {
		d.Close()
		return nil, err
	}
	if d.mgr, err = rsm.NewManager(d.bucket, rsm.Config{Prefix: cfg.Bucket.Prefix}); err != nil {
		d.Close()
		return nil, err
	}
	if d.copier, err = copier.New(cfg.Copier, store, d.mgr, copier.WithLogger(log.With("component", "copier")), copier.WithRegisterer(reg)); err != nil {
		d.Close()
		return nil, err
	}
	if d.fetch, err = fetch.NewServer(cfg.Fetch, store, d.mgr, fetch.WithLogger(log.With("component", "fetch")), fetch.WithRegisterer(reg)); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *daemon) Close() error {
	var errs []error
	if d.bucket != nil {
		errs = append(errs, d.bucket.Close())
	}
	return errors.Join(append(errs, d.store.Close())...)
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path of the YAML config file (required); see tierd.example.yaml")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: tierd run --config tierd.yaml")
		return 2
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintf(stderr, "tierd run: %v\n", err)
		return 1
	}
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := serve(ctx, cfg, log); err != nil {
		log.Error("tierd stopped", "err", err)
		return 1
	}
	return 0
}

// serve runs the copier loop, the gRPC fetch server and the HTTP metrics
// server in one run group until ctx ends or one of them fails.
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := newDaemon(ctx, cfg, log, reg)
	if err != nil {
		return err
	}
	defer d.Close()
	log.Info("tierd starting", "log_dirs", cfg.Copier.LogDirs, "bucket", d.bucket.Name(), "metadata", cfg.Metadata.Dir,
		"fetch", cfg.Fetch.Listen, "http", cfg.HTTP.Listen, "broker_owned", cfg.Copier.BrokerOwned)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g oklog.Group
	g.Add(func() error { return d.copier.Run(ctx) }, func(error) { cancel() })
	g.Add(func() error { return d.fetch.Run(ctx) }, func(error) { cancel() })
	if cfg.HTTP.Listen != "" {
		g.Add(func() error { return serveHTTP(ctx, cfg.HTTP.Listen, reg) }, func(error) { cancel() })
	}
	g.Add(func() error { <-ctx.Done(); return nil }, func(error) { cancel() })
	return g.Run()
}

func serveHTTP(ctx context.Context, addr string, reg *prometheus.Registry) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	ok := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }
	mux.HandleFunc("/-/healthy", ok)
	mux.HandleFunc("/-/ready", ok)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("http: listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
