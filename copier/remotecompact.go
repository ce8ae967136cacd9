package copier

import (
	"context"
	"math"
	"path/filepath"
	"time"

	"github.com/tierd/tierd/copier/remotecompact"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// Remote compaction (package remotecompact) runs at the end of a
// partition's pass, after remote retention: it merges runs of adjacent
// copies of a compacted topic into one copy, and deletes the copies it
// replaces through the delete protocol.

// newCompactor returns the copier's remote compaction (c.rc), over its
// store and bucket as New was given them, its delete protocol, its copy
// upload (throttled by the copy quota, fenced as any copy), and its
// suspect-copy and sweep requests. New calls it once the logger, the
// clock and the metrics registry are set.
func (c *Copier) newCompactor() *remotecompact.Compactor {
	return remotecompact.New(remotecompact.Deps{Store: c.store, Bucket: c.rs, Deleter: c.deletes(), Log: c.log,
		Now: func() time.Time { return c.now() },
		Upload: func(ctx context.Context, meta remotelog.SegmentMetadata, files rsm.SegmentFiles) (remotelog.SegmentMetadata, error) {
			files.Throttle = c.throttle
			return c.upload(ctx, meta, files)
		},
		FencedAfterManifest: errFencedAfterManifest, Suspect: c.audit.suspect, NeedSweep: c.needSweep}, c.reg)
}

// remoteCompact runs remote compaction for partition p with this pass's
// config: it merges at most one run of p's copies when the topic is
// compacted and remote compaction is on (remotecompact.Compactor.Compact).
func (c *Copier) remoteCompact(ctx context.Context, p *partition) error {
	part := remotecompact.Partition{TP: p.tp, TopicID: p.topicID, LeaderEpoch: p.leaderEpoch, Staging: filepath.Join(p.dir, StagingDir),
		LocalStart: math.MaxInt64, Renew: func(ctx context.Context) (bool, error) { return c.renew(ctx, p) }}
	if len(p.segs) > 0 {
		part.LocalStart = p.segs[0].base
	}
	o := remotecompact.Pass{Enabled: c.cfg.RemoteCompaction.Enable && p.policy.Compact, CopyTimeout: c.cfg.CopyTimeout,
		IndexIntervalBytes: c.cfg.IndexIntervalBytes, BrokerID: c.cfg.BrokerID, InstanceID: c.cfg.InstanceID, Form: c.rs.NewCopyForm()}
	if o.Enabled {
		// The topic configs last read stand in, whatever the view's age.
		o.Settings = remotecompact.Settings(c.cfg.resolve(p.tp.Topic, c.clusterConfigs(p.tp.Topic)).Compaction)
	}
	return c.rc.Compact(ctx, part, o)
}
