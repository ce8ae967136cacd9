package copier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier/remotecompact"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/quota"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// RemoteStorage is what the copier needs from rsm.Manager.
type RemoteStorage interface {
	CopySegment(ctx context.Context, meta remotelog.SegmentMetadata, files rsm.SegmentFiles) (*rsm.Manifest, error)
	NewCopyForm() string
	DeleteSegment(ctx context.Context, meta remotelog.SegmentMetadata) error
	AbortUploads(ctx context.Context, tp remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) (int, error)
	AbortUploadsOf(ctx context.Context, meta remotelog.SegmentMetadata) (int, error)
	Manifests(ctx context.Context, tp remotelog.TopicPartition) ([]*rsm.Manifest, error)
	SweepPartition(ctx context.Context, tp remotelog.TopicPartition, keep func(id remotelog.SegmentID, hasManifest bool) bool) (int, error)
	VerifyPresent(ctx context.Context, mf *rsm.Manifest) error
	ReadLease(ctx context.Context, tp remotelog.TopicPartition) (rsm.Lease, bool, error)
	CreateLease(ctx context.Context, tp remotelog.TopicPartition, o rsm.Owner) (rsm.Lease, error)
	ReplaceLease(ctx context.Context, tp remotelog.TopicPartition, prev rsm.Lease, o rsm.Owner) (rsm.Lease, error)
	ReadHeartbeat(ctx context.Context, brokerID int32, instanceID string) (rsm.HeartbeatVersioned, bool, error)
	WriteHeartbeat(ctx context.Context, prev *rsm.HeartbeatVersioned, h rsm.Heartbeat) (rsm.HeartbeatVersioned, error)
	RaiseFence(ctx context.Context, tp remotelog.TopicPartition, f rsm.Fence) (rsm.Fence, error)
	CheckFence(ctx context.Context, tp remotelog.TopicPartition, topicID string, leaderEpoch int32) error
	MissingObjects(ctx context.Context, meta remotelog.SegmentMetadata) ([]string, error)
	VerifyCopy(ctx context.Context, meta remotelog.SegmentMetadata) error
	CheckStore(ctx context.Context) error
	DownloadCopy(ctx context.Context, meta remotelog.SegmentMetadata, dir string) (*rsm.DownloadedCopy, error)
}

// MetadataStore is what the copier needs from rlmm.Store.
type MetadataStore interface {
	AddSegment(meta remotelog.SegmentMetadata) error
	UpdateState(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, to remotelog.SegmentState) (remotelog.SegmentMetadata, error)
	UpdateStates(tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, to remotelog.SegmentState) ([]remotelog.SegmentMetadata, error)
	Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	FinishedSegments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error)
	EnsurePartition(tp remotelog.TopicPartition, logStartOffset int64) error
	AdvanceOffsets(tp remotelog.TopicPartition, logStart, localLogStart int64) (remotelog.PartitionOffsets, error)
	ImportSegment(meta remotelog.SegmentMetadata) error
	Partitions() ([]remotelog.TopicPartition, error)
	Segment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error)
	ForgetSegment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) error
	MarkDamaged(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, reason string) (remotelog.SegmentMetadata, error)
	ClearDamaged(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error)
	ClusterID() (string, error)
	SetClusterID(id string) error
	ScheduleDeletion(tp remotelog.TopicPartition, topicID string, reason remotelog.DeletionReason, proof string, dueMs int64) (remotelog.PartitionDeletion, error)
	CancelDeletion(tp remotelog.TopicPartition, topicID, detail string, keep bool) (remotelog.PartitionDeletion, error)
	StartDeletion(tp remotelog.TopicPartition, topicID, detail string) (remotelog.PartitionDeletion, error)
	FinishDeletion(tp remotelog.TopicPartition, topicID, detail string) error
	Deletions(tp *remotelog.TopicPartition) ([]remotelog.PartitionDeletion, error)
	SetTopicID(tp remotelog.TopicPartition, id string) error
	ResetPartition(tp remotelog.TopicPartition, logStartOffset int64, topicID string) error
	PurgeDeleted(tp remotelog.TopicPartition, beforeMs int64) (int, error)
}

// Option sets an optional collaborator.
type Option func(*Copier)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *Copier) { c.log = l } }

// WithRegisterer registers the copier's metrics.
func WithRegisterer(r prometheus.Registerer) Option { return func(c *Copier) { c.reg = r } }

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(c *Copier) { c.now = now } }

// Copier is the shipper: each Sync pass copies rolled segments to remote
// storage and applies local and remote retention. A pass is idempotent: it
// reads local files and remote metadata afresh, so a crash between any two
// steps is repaired by the next pass.
type Copier struct {
	cfg   Config // dynamic fields change between passes (applyPending)
	base  Config // as given to New; never written
	store MetadataStore
	rs    RemoteStorage
	log   *slog.Logger
	reg   prometheus.Registerer
	now   func() time.Time
	m     *metrics
	rc    *remotecompact.Compactor // remote compaction (remotecompact.go)
	mu    sync.Mutex               // one pass at a time

	stateMu   sync.Mutex // guards the maps below
	warns     map[string]bool
	times     map[string]map[string]int64 // max timestamp by partition dir, then segment file (path+size)
	swept     map[remotelog.TopicPartition]bool
	held      map[remotelog.TopicPartition]string // this pass's held partitions, by reason (Status has the last pass's)
	cl        Cluster                             // nil: no Kafka cluster configured
	own       owner                               // the lease, or the cluster's leadership (ownership.go)
	owned     []remotelog.TopicPartition          // partitions this pass worked on
	cs        clusterState
	configs   map[string]map[string]cluster.ConfigValue // last topic configs read, by topic
	pending   *Config                                   // from Reconfigure, for the next pass
	copyQuota *quota.Limiter

	rep    *reporter    // wait reasons, status, progress logs, Kafka-named metrics (reporter.go)
	gate   func() error // nil: every pass runs (see WithGate)
	waited bool         // retention waited for initial_retention_delay in this process

	audit *auditor // checks of finished copies: reported, sampled, and each proof right before a delete (audit.go)
	dirs  *logDirs // the log dirs' probe and watch (logdir.go)
}

// New returns a copier. It does no I/O. With OwnershipLease on,
// cfg.InstanceID must be set.
func New(cfg Config, store MetadataStore, rs RemoteStorage, opts ...Option) (*Copier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.OwnershipLease > 0 && cfg.InstanceID == "" {
		return nil, errors.New("copier: an instance id is required with ownership_lease (tierd run keeps one in the metadata dir)")
	}
	c := newCopier(cfg, withReadCache(store), rs)
	for _, o := range opts {
		o(c)
	}
	if c.reg == nil {
		c.reg = prometheus.NewRegistry()
	}
	c.m = newMetrics(c.reg)
	c.dirs.attach(c.log, c.m)
	c.audit = newAuditor(&c.cfg, c.now, c.log, c.store, c.rs, func() error { _, err := c.environment(); return err },
		c.m.copiesChecked, c.m.damaged)
	c.rc = c.newCompactor()
	c.own = c.newOwner()
	c.bindReporter()
	c.rep.register(c.reg)
	c.initDynamic()
	return c, nil
}

// newCopier returns a copier with its defaults and no metrics.
func newCopier(cfg Config, store MetadataStore, rs RemoteStorage) *Copier {
	c := &Copier{cfg: cfg, base: cfg, store: store, rs: rs, log: slog.New(slog.DiscardHandler), now: time.Now,
		warns: map[string]bool{}, times: map[string]map[string]int64{}, swept: map[remotelog.TopicPartition]bool{},
		held: map[remotelog.TopicPartition]string{}, configs: map[string]map[string]cluster.ConfigValue{}, rep: newReporter()}
	c.dirs = newLogDirs(&c.cfg, c.once, func(drop func(string) bool) {
		c.stateMu.Lock()
		defer c.stateMu.Unlock()
		for k := range c.warns {
			if drop(k) {
				delete(c.warns, k)
			}
		}
	})
	return c
}

// bindReporter gives the reporter the copier's logger, clock, store and
// gate as the options left them.
func (c *Copier) bindReporter() {
	c.rep.bind(reporterDeps{log: c.log, now: c.now, store: c.store, env: c.environment, tiered: c.tiered})
}

// Status returns every partition's status as the last pass left it, with
// the copies in flight now: a value for tools, the status page and
// metrics. While the gate (see WithGate) says passes must wait, every
// partition shows as waiting for the gate's reason at once, not only
// after the next pass: a bucket watch or a metadata store turning down
// between passes shows in the status as soon as it does in readiness.
func (c *Copier) Status() remotelog.TieringStatus { return c.rep.status() }

// wait records why a partition is not copied this pass (the first reason
// given in a pass stands); the owners and the whole-partition deletions
// say it through this (partitionReporter).
func (c *Copier) wait(tp remotelog.TopicPartition, reason remotelog.WaitReason, detail string) {
	c.rep.wait(tp, reason, detail)
}

// Run calls Sync every Interval until ctx is done; a failed pass is logged
// and counted, and the next pass retries. When ctx is done it releases the
// ownership leases it holds (best effort) and returns.
func (c *Copier) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Interval())
	defer t.Stop()
	last := ""
	for {
		// The same errors pass after pass (a held partition waiting for
		// an operator) are logged once, then at debug level.
		if _, err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			if msg := err.Error(); msg != last {
				c.log.Warn("sync pass had errors", "err", err)
				last = msg
			} else {
				c.log.Debug("sync pass had the same errors as the last one", "err", err)
			}
		} else if err == nil {
			last = ""
		}
		select {
		case <-ctx.Done():
			c.releaseLeases(ctx)
			return nil
		case <-t.C:
		}
	}
}

// Sync makes one pass over every partition of every log dir: copy, then
// local retention, then remote retention; then the scheduled deletions of
// whole partitions that are due. A failing partition does not stop the
// others; their errors are joined. It returns the number of segments
// copied.
func (c *Copier) Sync(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.gateErr(); err != nil {
		return 0, err
	}
	c.rep.beginPass()
	c.own.beginPass()
	c.applyPending()
	c.beginRetentionWait()
	parts, errs := c.scan()
	c.holdUnseen(parts)
	c.refreshCluster(ctx, parts)
	var (
		mu     sync.Mutex
		copied int
		wg     sync.WaitGroup
		sem    = make(chan struct{}, c.cfg.CopierThreadPoolSize)
		failed = len(errs) > 0 // a log dir not read
	)
	for _, p := range parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			n, err := c.syncPartition(ctx, p)
			st := c.rep.partitionDone(p, n, err, c.retentionWaitDetail(p))
			mu.Lock()
			defer mu.Unlock()
			copied += n
			failed = failed || failedPartition(st, err)
			if err != nil {
				c.m.partitionErrors.Inc()
				c.needSweep(p.tp)
				errs = append(errs, fmt.Errorf("%s: %w", p.tp, err))
			}
		}()
	}
	wg.Wait()
	c.stateMu.Lock()
	owned := c.owned
	c.owned = nil
	c.stateMu.Unlock()
	for _, err := range []error{c.audit.checkCopies(ctx, owned), c.deletions().checkGoneTopics(ctx), c.deletions().runDeletions(ctx)} {
		if err != nil {
			errs, failed = append(errs, err), true
		}
	}
	c.pruneTimesOf(parts)
	c.publishHeld()
	c.rep.endPass(parts, failed)
	c.m.passes.Inc()
	if len(errs) > 0 {
		c.m.passErrors.Inc()
	}
	return copied, errors.Join(errs...)
}

// scan lists the live partition directories of every log dir, with the
// high watermark and log start offset the broker checkpointed for each.
// Directories a broker is deleting, moving or has left as strays
// ("<topic>-<p>.<uuid>-delete", "-future", "-stray") are not partitions
// and say nothing about remote data; they are noted once and skipped. A
// partition live in two log dirs at once (a move between log dirs caught
// half way) is skipped for this pass.
func (c *Copier) scan() ([]*partition, []error) {
	var errs []error
	byTP := map[remotelog.TopicPartition]*partition{}
	dup := map[remotelog.TopicPartition][]string{}
	internal := map[string]bool{}
	states := c.dirs.probe()
	faults := map[string]string{}
	defer func() { c.dirs.setFaults(faults) }()
	for _, dir := range c.cfg.LogDirs {
		st := states[dir]
		if !st.Available {
			faults[dir] = st.Err
			errs = append(errs, fmt.Errorf("log dir %s is unavailable: %s", dir, st.Err))
			continue
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			faults[dir] = err.Error()
			errs = append(errs, fmt.Errorf("read log dir: %w", err))
			continue
		}
		hw, err := checkpoint.ReadFile(filepath.Join(dir, kafkalog.ReplicationOffsetCheckpointFile))
		if err != nil {
			faults[dir] = err.Error()
			errs = append(errs, err)
			continue
		}
		lsos, err := checkpoint.ReadFile(filepath.Join(dir, kafkalog.LogStartOffsetCheckpointFile))
		if err != nil {
			faults[dir] = err.Error()
			errs = append(errs, err)
			continue
		}
		// Read for compacted topics only; an unreadable file holds them
		// alone (their status says why), not the log dir.
		cleaned, cerr := readCleanerCheckpoint(dir)
		found := 0
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			tp, ok := kafkalog.ParsePartitionDir(e.Name())
			if !ok {
				if tp, ok := kafkalog.ParseDeletedPartitionDir(e.Name()); ok && c.tiered(tp) && c.once("deletedir "+e.Name()) {
					c.log.Info("partition directory is being deleted or moved by the broker; tierd does not act on it, and its remote copies stay",
						"dir", filepath.Join(dir, e.Name()), "partition", tp)
				}
				continue
			}
			found++
			if !c.tiered(tp) {
				internal[tp.Topic] = true
				continue
			}
			p := &partition{tp: tp, dir: filepath.Join(dir, e.Name()), hw: -1, brokerLSO: -1, leaderEpoch: -1,
				brokerOwned: st.BrokerOwned, ownedWhy: st.Why, owner: st.Owner}
			if hw != nil {
				p.hw, p.inCheckpoint = hw[tp] // a partition missing from the file has nothing committed
				p.hwKnown = true
				c.warnNotInCheckpoint(p)
			}
			if v, ok := lsos[tp]; ok {
				p.brokerLSO = v
			}
			p.cleaner = cleanerOf(cleaned, cerr, tp)
			if prev, ok := byTP[tp]; ok {
				dup[tp] = append(dup[tp], prev.dir, p.dir)
				continue
			}
			byTP[tp] = p
		}
		c.warnEmptyLogDir(dir, found)
	}
	c.rep.noteSkipped(internal)
	parts := make([]*partition, 0, len(byTP))
	for tp, p := range byTP {
		if dirs, ok := dup[tp]; ok {
			c.hold(tp, heldDuplicateDir, fmt.Sprintf("live in more than one log dir: %v", dirs))
			continue
		}
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].tp.String() < parts[j].tp.String() })
	return parts, errs
}

// tiered reports whether tierd tiers a topic. Kafka's internal topics
// (names starting with "__": __consumer_offsets, __transaction_state,
// __cluster_metadata) are never tiered by a broker, and tierd leaves them
// alone too.
func (c *Copier) tiered(tp remotelog.TopicPartition) bool { return !strings.HasPrefix(tp.Topic, "__") }

// partition is one partition directory during a pass.
type partition struct {
	tp        remotelog.TopicPartition
	dir       string
	hw        int64 // high watermark from replication-offset-checkpoint
	hwKnown   bool
	brokerLSO int64 // from log-start-offset-checkpoint, -1 if unknown
	topicID   string
	segs      []localSegment
	limits    topics.Limits
	// leaderEpoch is the partition's leader epoch when the cluster makes
	// this broker its leader; -1 without a cluster.
	leaderEpoch int32
	// copyDone: the pass reached copyRolled, which returned copyErr.
	copyDone bool
	copyErr  error
	// inCheckpoint: the partition has an entry in the checkpoint.
	inCheckpoint bool
	// hasDeleted: the directory held files renamed to .deleted when the
	// pass listed it.
	hasDeleted bool
	// policy is the topic's cleanup.policy as the pass resolved it.
	policy topics.CleanupPolicy
	// cleaner is the partition's entry in the log dir's
	// cleaner-offset-checkpoint (compacted.go).
	cleaner cleanerEntry
	// brokerOwned: tierd renames and deletes no file in the partition's
	// log dir (its LogDirState, or a broker's lock found since); ownedWhy
	// says why.
	brokerOwned     bool
	ownedWhy, owner string
	// retentionWait says what retention would delete, and when, while
	// it waits for initial_retention_delay (nil when it does not wait).
	retentionWait []string
}

func (c *Copier) syncPartition(ctx context.Context, p *partition) (int, error) {
	if err := cleanStaging(p.dir); err != nil {
		return 0, err
	}
	var err error
	if p.segs, p.hasDeleted, err = listDir(p.dir); err != nil {
		return 0, err
	}
	st := c.settings(p.tp.Topic)
	if !st.Tiering.Enabled && !st.Tiering.DeletesRemote() {
		c.leftAlone(p.tp, st.Tiering)
		return 0, nil
	}
	if own, err := c.owns(ctx, p); err != nil || !own {
		return 0, err
	}
	if !st.Tiering.Enabled {
		return 0, c.deletions().deleteOnDisable(p, st)
	}
	c.unwarn("disabled " + p.tp.Topic + "\x00")
	if err := c.deletions().reenabled(p, st); err != nil {
		return 0, err
	}
	c.stateMu.Lock()
	c.owned = append(c.owned, p.tp)
	c.stateMu.Unlock()
	p.limits, p.policy = st.Limits, st.CleanupPolicy
	for _, w := range st.Warnings {
		if c.once(p.tp.Topic + w) {
			c.log.Warn("retention setting clamped", "topic", p.tp.Topic, "warning", w)
		}
	}
	if err := c.checkIncarnation(ctx, p); err != nil {
		return 0, err
	}
	if _, err := c.adoptPartition(ctx, p); err != nil {
		return 0, err
	}
	if err := c.maybeSweep(ctx, p.tp); err != nil {
		return 0, err
	}
	if p.brokerLSO >= 0 && c.plausibleBrokerLSO(p) {
		if err := c.advanceOffsets(p.tp, p.brokerLSO, -1); err != nil {
			return 0, err
		}
	}
	if err := c.deletes().CleanupUnfinished(ctx, p.tp); err != nil {
		return 0, err
	}
	var (
		copied  int
		copyErr error
		errs    []error
	)
	if st.Tiering.CopyDisabled {
		c.wait(p.tp, remotelog.WaitTieringDisabled, "copying is off: "+st.Tiering.String())
		if c.once("copy-disabled " + p.tp.Topic + "\x00") {
			c.log.Info("copying is off for the topic (remote.log.copy.disable): its copies stay readable, retention follows retention.ms/bytes",
				"topic", p.tp.Topic, "policy", st.Tiering.String())
		}
	} else {
		c.unwarn("copy-disabled " + p.tp.Topic + "\x00")
		copied, copyErr = c.copyRolled(ctx, p)
		p.copyDone, p.copyErr = true, copyErr
	}
	if copyErr != nil {
		errs = append(errs, copyErr)
	}
	if !st.known {
		if c.once("noconfigs " + p.tp.Topic) {
			c.log.Warn("the topic's configs could not be read from the cluster yet: no retention applied until they are", "partition", p.tp)
		}
		c.pruneTimes(p)
		return copied, errors.Join(errs...)
	}
	c.unwarn("noconfigs " + p.tp.Topic)
	if !p.brokerOwned {
		if err := c.localRetention(ctx, p); err != nil {
			errs = append(errs, fmt.Errorf("local retention: %w", err))
		}
		// Files local retention renames this pass are due at once only
		// with file.delete.delay.ms 0; others wait for a later listing.
		if !p.brokerOwned && (p.hasDeleted || c.cfg.FileDeleteDelayMs == 0) {
			if _, err := c.withoutBroker(p, func() error { return c.removeDeleted(p.dir) }); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if p.brokerOwned && len(p.segs) > 0 {
		// The broker's retention moves the local log start offset.
		if err := c.advanceOffsets(p.tp, -1, p.segs[0].base); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.remoteRetention(ctx, p); err != nil {
		errs = append(errs, fmt.Errorf("remote retention: %w", err))
	} else if err := c.remoteCompact(ctx, p); err != nil {
		errs = append(errs, err)
	}
	c.pruneTimes(p)
	if err := c.purgeDeleted(p.tp); err != nil {
		errs = append(errs, err)
	}
	return copied, errors.Join(errs...)
}
