package copier

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
)

// Evaluate returns the status a pass would start from, for tools acting on
// a stopped tierd: it reads the log dirs (segments, checkpoints) and the
// metadata store only, never the bucket or the Kafka cluster, and copies,
// claims and deletes nothing. A partition with segments to copy waits for
// remotelog.WaitNotRunning unless its high watermark or checkpoint
// already explains why it would wait; holds, leases and leadership are
// not known without a running tierd. Running is false and Passes 0. The
// error joins what could not be read (a log dir, a checkpoint); the
// status covers the rest.
func Evaluate(cfg Config, store MetadataStore, now time.Time) (remotelog.TieringStatus, error) {
	c := newCopier(cfg, store, nil)
	c.now = func() time.Time { return now }
	c.m = newMetrics(prometheus.NewRegistry())
	c.dirs.attach(c.log, c.m)
	c.bindReporter()
	parts, errs := c.scan()
	c.holdUnseen(parts)
	for _, p := range parts {
		var err error
		if p.segs, err = listSegments(p.dir); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.tp, err))
		}
		p.copyDone = true // nothing stopped it: it did not run
		p.policy = cfg.resolve(p.tp.Topic, nil).CleanupPolicy
		st := c.rep.partitionStatus(p, nil, c.retentionWaitDetail(p))
		if st.State == remotelog.TierWaiting && st.Reason == remotelog.WaitNextPass {
			st.Reason = remotelog.WaitNotRunning
			st.Detail = fmt.Sprintf("no tierd is running: %d rolled segments (%d bytes) wait for it", st.PendingSegments, st.PendingBytes)
		}
		c.rep.record(p.tp, st)
	}
	c.rep.endPass(parts, false)
	out := c.Status()
	out.Running, out.Passes, out.LastPassMs, out.LastSuccessMs = false, 0, -1, -1
	return out, errors.Join(errs...)
}
