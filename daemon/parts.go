package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/instance"
	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/listener/groups"
	"github.com/tierd/tierd/logview"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsmapi"
)

// Parts are tierd's parts opened from a config and wired together: what
// "tierd run" serves (Run) and what "tierd demo" and the offline tools
// ("tierd admin", "tierd rlmm") drive in process. OpenParts builds them;
// Close releases the store and the bucket. Nothing runs until a caller
// runs the long-running ones (Watch, Copier, API, RSM) in its run group.
type Parts struct {
	Store      *rlmm.Store
	Bucket     rsm.Bucket // the configured bucket behind the bucket watch (and any wrap)
	Manager    *rsm.Manager
	Copier     *copier.Copier
	API        *grpcapi.Server // the gRPC API over the remote read engine (API.Engine())
	View       *logview.View   // both tiers joined, for the Kafka listener
	Kafka      *cluster.Client // nil without kafka.bootstrap_servers
	Registerer prometheus.Registerer
	Watch      *rsm.Watch          // the object store's verdict
	Labels     *partlabels.Set     // bounds the per-partition series of every part
	RSM        *rsmapi.Server      // the RSM endpoint; nil unless rsm.enabled (Run)
	Groups     *groups.Coordinator // the Kafka listeners' group coordinator; nil without a Kafka listener or with kafka.group.coordinator.enable false

	InstanceID string // kept in the metadata dir (internal/instance)
}

// PartsOptions are what "tierd run" adds at start to the config it read;
// the zero value is the tools' and the demo's.
type PartsOptions struct {
	// KeepCreated: tierd run keeps the metadata dir's creation time
	// (copier.Config.MetadataCreatedMs, see MetadataCreated); the tools
	// and the demo do not. RetentionGoAhead is tierd run
	// --retention-go-ahead.
	KeepCreated, RetentionGoAhead bool
	// LogDirCheck, set by Run, says whether a log dir is still the one it
	// locked at start (copier.WithLogDirCheck); nil: no check.
	LogDirCheck func(dir string) error
	// Wrap, when given, decorates the bucket before anything uses it (the
	// demo confines itself to its own prefix this way).
	Wrap func(rsm.Bucket) (rsm.Bucket, error)
}

// OpenStore opens the metadata store, saying so when another tierd holds
// it; it gives up when ctx ends (SIGINT, SIGTERM).
func OpenStore(ctx context.Context, cfg config.Config, opts ...rlmm.Option) (*rlmm.Store, error) {
	s, err := rlmm.OpenContext(ctx, cfg.Metadata, opts...)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		return nil, &StopError{Dir: cfg.Metadata.Dir}
	}
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("metadata dir %s is locked: another tierd is using it (%w)", cfg.Metadata.Dir, err)
	}
	return s, err
}

// OpenParts opens the metadata store (OpenStore), the instance id, the
// bucket (OpenBucket, behind the bucket watch) and the Kafka cluster
// client of cfg, and builds the copier, the gRPC API with its read engine
// and the joined log view over them, their metrics on reg and their logs
// on log. Errors: OpenStore's (*StopError when ctx ends first), the
// instance id's, the bucket's and each part's config errors; on an error
// whatever was opened is closed.
func OpenParts(ctx context.Context, cfg config.Config, start PartsOptions, log *slog.Logger, reg prometheus.Registerer) (*Parts, error) {
	store, err := OpenStore(ctx, cfg, rlmm.WithRegisterer(reg), rlmm.WithLogger(log.With("component", "rlmm")))
	if err != nil {
		return nil, err
	}
	d := &Parts{Store: store, Registerer: reg}
	if start.KeepCreated { // before the instance id is kept: a metadata dir without one is new
		if cfg.Copier.MetadataCreatedMs, err = MetadataCreated(cfg.Metadata.Dir, start.RetentionGoAhead, time.Now(), log); err != nil {
			d.Close()
			return nil, err
		}
		NoteInitialRetention(cfg, time.Now(), log)
	}
	// The instance id lives in the metadata dir; when that was lost, the
	// log dirs' lock files still name it.
	id, source, err := instance.Load(cfg.Metadata.Dir, instance.Recorded(cfg.Copier.LogDirs))
	if err != nil {
		d.Close()
		return nil, err
	}
	log.Info("instance id", "instance_id", id, "from", source, "broker_id", cfg.Copier.BrokerID)
	d.InstanceID, cfg.Copier.InstanceID = id, id
	if d.Bucket, err = OpenBucket(ctx, cfg.Bucket); err != nil {
		d.Close()
		return nil, err
	}
	if start.Wrap != nil {
		b, err := start.Wrap(d.Bucket)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.Bucket = b
	}
	d.Watch = rsm.NewWatch(d.Bucket, cfg.Bucket.Prefix, cfg.Copier.Interval(), log.With("component", "bucket"), reg)
	d.Bucket = d.Watch.Wrap(d.Bucket)
	mc, err := ManagerConfig(cfg.Objects, cfg.Bucket.Prefix)
	if err != nil {
		d.Close()
		return nil, err
	}
	mc.Metrics = rsm.NewObjectMetrics(reg)
	if d.Manager, err = rsm.NewManager(d.Bucket, mc); err != nil {
		d.Close()
		return nil, err
	}
	labels := partlabels.New(cfg.Metrics.PartitionLabelsMax) // one bound for the copier's, fetch's and the RSM endpoint's series
	d.Labels = labels
	copts := []copier.Option{copier.WithLogger(log.With("component", "copier")), copier.WithRegisterer(reg), copier.WithPartitionLabels(labels),
		copier.WithGate(d.environment)}
	if start.LogDirCheck != nil {
		copts = append(copts, copier.WithLogDirCheck(start.LogDirCheck))
	}
	if cfg.Kafka.Cluster.Enabled() {
		if d.Kafka, err = cluster.New(cfg.Kafka.Cluster, cluster.WithLogger(log.With("component", "kafka"))); err != nil {
			d.Close()
			return nil, err
		}
		copts = append(copts, copier.WithCluster(d.Kafka))
	}
	if d.Copier, err = copier.New(cfg.Copier, store, d.Manager, copts...); err != nil {
		d.Close()
		return nil, err
	}
	apiOpts := []grpcapi.Option{grpcapi.WithLogger(log.With("component", "fetch")), grpcapi.WithRegisterer(reg),
		grpcapi.WithAdmin(d.Copier, store, Identity(cfg, d.InstanceID)),
		grpcapi.WithEngine(remoteread.WithMissingCopyHook(d.Copier.SuspectCopy), remoteread.WithPartitionLabels(labels),
			remoteread.WithStoreHealth(d.Watch.Err))}
	if eps, _ := cfg.KafkaEndpoints(); len(eps) > 0 && GroupsWhere(cfg) == listener.GroupsLocal {
		hw := func(ctx context.Context, tp remotelog.TopicPartition) (int64, error) { // d.View is set below, before anything runs
			o, err := d.View.Offsets(ctx, listener.TopicPartition(tp))
			return o.HighWatermark, err
		}
		if d.Groups, err = groups.New(cfg.Kafka.Listener.Groups, store, groups.WithLogger(log.With("component", "groups")),
			groups.WithRegisterer(reg), groups.WithHighWatermarks(hw)); err != nil {
			d.Close()
			return nil, err
		}
		apiOpts = append(apiOpts, grpcapi.WithGroups(d.Groups))
	}
	if d.API, err = grpcapi.NewServer(cfg.Fetch.Config, store, d.Manager, apiOpts...); err != nil {
		d.Close()
		return nil, err
	}
	vcfg := logview.DefaultConfig()
	vcfg.LogDirs, vcfg.BrokerOwned = cfg.Copier.LogDirs, viewBrokerOwned(cfg.Copier)
	if d.View, err = logview.New(vcfg, d.API.Engine(), logview.WithLogger(log.With("component", "logview"))); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// GroupsWhere says where the Kafka listeners' consumer groups live:
// listener.GroupsLocal (tierd's coordinator, Parts.Groups),
// listener.GroupsCluster (relayed to the cluster, Parts.Kafka), or ""
// (not served: kafka.group.coordinator.enable false).
func GroupsWhere(cfg config.Config) string {
	l := cfg.Kafka.Listener
	switch {
	case !l.GroupCoordinatorEnable:
		return ""
	case l.GroupCoordinator == listener.GroupsCluster, l.GroupCoordinator == listener.GroupsAuto && cfg.Kafka.Cluster.Enabled():
		return listener.GroupsCluster
	}
	return listener.GroupsLocal
}

// KafkaListener returns the Kafka protocol listener over both tiers, its
// node id tierd's broker_id (0 when unset) and its cluster id the Kafka
// cluster's recorded one, else one naming this tierd. advertised, when
// set, replaces the configured advertised address.
func (d *Parts) KafkaListener(cfg config.Config, log *slog.Logger, advertised string, extra ...listener.Option) (*listener.Server, error) {
	lc := cfg.Kafka.Listener
	if advertised != "" {
		lc.Advertised = advertised
	}
	node := max(cfg.Copier.BrokerID, 0)
	clusterID, err := d.Store.ClusterID()
	if err != nil {
		return nil, err
	}
	if clusterID == "" {
		clusterID = "tierd-" + d.InstanceID
	}
	return listener.New(lc, d.View, append([]listener.Option{listener.WithLogger(log.With("component", "kafka-listener")), listener.WithRegisterer(d.Registerer),
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

// Close closes the cluster client, the bucket and the metadata store.
func (d *Parts) Close() error {
	if d.Kafka != nil {
		d.Kafka.Close()
	}
	var errs []error
	if d.Bucket != nil {
		errs = append(errs, d.Bucket.Close())
	}
	return errors.Join(append(errs, d.Store.Close())...)
}

// StopError is what OpenStore returns when a stop (SIGTERM, SIGINT)
// interrupted it: dir is the metadata dir.
type StopError struct{ Dir string }

func (e *StopError) Error() string { return "stopped while opening the metadata store " + e.Dir }

// Identity is what the Admin service says of the tierd it is part of:
// its instance id, its metadata dir (absolute), log dirs and broker id.
func Identity(cfg config.Config, instanceID string) grpcapi.Identity {
	dir, err := filepath.Abs(cfg.Metadata.Dir)
	if err != nil {
		dir = cfg.Metadata.Dir
	}
	return grpcapi.Identity{InstanceID: instanceID, MetadataDir: dir, LogDirs: cfg.Copier.LogDirs, BrokerID: cfg.Copier.BrokerID}
}
