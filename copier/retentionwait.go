package copier

import (
	"fmt"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/saturate"
)

// Retention on a new metadata dir waits (Config.InitialRetentionDelay):
// a first start over old data (a new tierd beside an old log, a lost
// metadata dir) would otherwise copy everything and delete what is past
// retention, locally and remotely, in its first pass. Until
// MetadataCreatedMs + InitialRetentionDelay, localRetention and
// remoteRetention decide as always, then delete nothing (local retention
// does not even check its proofs in the bucket), and say what they would
// delete: one log line per partition and tier each time it changes, and
// the partition's status. The setting is dynamic, so a reload with 0 lets
// retention go ahead at the next pass.

// retentionWaits returns when retention may first delete on this
// metadata dir, ms since the epoch, and whether nowMs is before that
// (see Config.InitialRetentionDelay).
func (c *Copier) retentionWaits(nowMs int64) (untilMs int64, waits bool) {
	if c.cfg.MetadataCreatedMs <= 0 || c.cfg.InitialRetentionDelay <= 0 {
		return 0, false
	}
	untilMs = saturate.Add(c.cfg.MetadataCreatedMs, c.cfg.InitialRetentionDelay.Milliseconds())
	return untilMs, nowMs < untilMs
}

// beginRetentionWait logs, at the start of a pass, that the wait for
// initial_retention_delay is over, once, when this process saw it. c.mu
// is held.
func (c *Copier) beginRetentionWait() {
	until, waits := c.retentionWaits(c.now().UnixMilli())
	switch {
	case waits:
		c.waited = true
	case c.waited:
		c.waited = false
		c.log.Info("initial_retention_delay is over: retention deletes from this pass on", "since", timeText(until))
	}
}

// noteRetentionWait records, for p's status, what retention would delete
// on tier ("local" or "remote") once the wait is over: n segments (local)
// or copies (remote) from base offset first to end offset last, bytes in
// all; and logs it once per change.
func (c *Copier) noteRetentionWait(p *partition, tier string, n int, first, last, bytes, untilMs int64) {
	what := "local segments"
	if tier == "remote" {
		what = "remote copies"
	}
	p.retentionWait = append(p.retentionWait, fmt.Sprintf("%d %s, offsets %d-%d, %d bytes", n, what, first, last, bytes))
	if c.once(fmt.Sprintf("rwait %s %s %d %d %d", p.tp, tier, n, first, last)) {
		c.log.Warn("retention waits for initial_retention_delay (a new metadata dir) and will then delete these; "+
			"'tierd run --retention-go-ahead' or initial_retention_delay: 0 lets it go ahead now",
			"partition", p.tp, "tier", tier, "segments", n, "base_offset", first, "end_offset", last, "bytes", bytes, "until", timeText(untilMs))
	}
}

// retentionWaitDetail is the sentence the partition's status gets while
// retention waits: "" when it does not.
func (c *Copier) retentionWaitDetail(p *partition) string {
	if len(p.retentionWait) == 0 {
		return ""
	}
	until, _ := c.retentionWaits(c.now().UnixMilli())
	return fmt.Sprintf("retention waits until %s (initial_retention_delay on a new metadata dir), then deletes %s",
		timeText(until), strings.Join(p.retentionWait, " and "))
}

func timeText(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
