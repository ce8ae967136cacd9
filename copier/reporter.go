package copier

import (
	"log/slog"
	"sort"
	"time"

	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/remotelog"
)

// reporter is the copier's one place for what it reports: why each
// partition waits (wait, waitHeld), its status as each pass leaves it
// (Status), the copies in flight and their progress logs (startCopy,
// logProgress), and the metrics named after Kafka's (countCopy,
// countDelete, and the gauges computed from Status when scraped). It
// reads the metadata store for the remote side of a status, and asks the
// gate's verdict (env); it changes nothing outside itself. Its methods
// may be called from every partition's goroutine of a pass.
type reporter struct {
	log    *slog.Logger
	now    func() time.Time
	store  statusStore
	env    func() (remotelog.WaitReason, error) // the gate's verdict now: "" and nil when passes may run
	tiered func(remotelog.TopicPartition) bool  // whether tierd tiers a partition's topic

	st            *statusState    // per-partition status (status.go)
	labels        *partlabels.Set // per-partition metric labels, bounded
	rm            *remoteMetrics  // metrics named after Kafka's (kafkametrics.go); nil until register
	progressEvery time.Duration   // how often a long copy logs its progress
}

// statusStore is what the reporter reads from the metadata store: the
// remote side of a partition's status, and the partitions it knows.
type statusStore interface {
	Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error)
	Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	Partitions() ([]remotelog.TopicPartition, error)
}

// reporterDeps are what a reporter reads: see the fields of reporter.
type reporterDeps struct {
	log    *slog.Logger
	now    func() time.Time
	store  statusStore
	env    func() (remotelog.WaitReason, error)
	tiered func(remotelog.TopicPartition) bool
}

// newReporter returns a reporter with nothing reported yet and the
// default progress interval; bind gives it what it reads, and register
// its metrics (before register, labels may be replaced: see
// WithPartitionLabels).
func newReporter() *reporter {
	return &reporter{st: newStatusState(), progressEvery: defaultProgressEvery}
}

// bind sets what the reporter reads, once the copier's options are
// applied.
func (r *reporter) bind(d reporterDeps) {
	r.log, r.now, r.store, r.env, r.tiered = d.log, d.now, d.store, d.env, d.tiered
}

// wait records why a partition is not copied this pass (the first reason
// given in a pass stands).
func (r *reporter) wait(tp remotelog.TopicPartition, reason remotelog.WaitReason, detail string) {
	r.waitHeld(tp, reason, "", detail)
}

// waitHeld is wait with the hold reason, for remotelog.WaitHeld.
func (r *reporter) waitHeld(tp remotelog.TopicPartition, reason remotelog.WaitReason, held, detail string) {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	if _, ok := r.st.waits[tp]; !ok {
		r.st.waits[tp] = waitNote{reason: reason, held: held, detail: detail}
	}
}

// beginPass forgets the last pass's decisions.
func (r *reporter) beginPass() {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	r.st.waits = map[remotelog.TopicPartition]waitNote{}
	r.st.deletionWaits = map[remotelog.TopicPartition]string{}
}

// partitionDone records the status of a partition the pass synced (n
// segments copied, err what it returned; retention is the sentence
// retention adds while it waits, "" when it does not) and logs, at debug
// level, what the pass decided for it and why. It returns the status.
func (r *reporter) partitionDone(p *partition, n int, err error, retention string) remotelog.PartitionStatus {
	st := r.partitionStatus(p, err, retention)
	r.record(p.tp, st)
	r.log.Debug("partition pass decided", "partition", p.tp, "state", st.State, "reason", st.Reason, "detail", st.Detail,
		"copied", n, "pending_segments", st.PendingSegments, "pending_bytes", st.PendingBytes, "err", err)
	return st
}

// record sets a partition's status until the next pass over it.
func (r *reporter) record(tp remotelog.TopicPartition, st remotelog.PartitionStatus) {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	r.st.parts[tp] = st
}

// partitionStatus says what a pass over p decided and why; err is what
// the pass returned for it, retention as for partitionDone.
func (r *reporter) partitionStatus(p *partition, err error, retention string) remotelog.PartitionStatus {
	rows, offs, _ := r.readRemote(p.tp)
	r.st.mu.Lock()
	w, waiting := r.st.waits[p.tp]
	r.st.mu.Unlock()
	in := statusInputs{p: p, err: err, rows: rows, offs: offs, env: r.env, retention: retention, nowMs: r.now().UnixMilli()}
	if waiting {
		in.wait = &w
	}
	return partitionStatusOf(in)
}

// readRemote returns the partition's rows and offsets from the metadata
// store; known is false when the store does not know the partition (or
// its offsets could not be read), and then offs is unknown (-1) and rows
// nil. Rows that cannot be read are nil.
func (r *reporter) readRemote(tp remotelog.TopicPartition) (rows []remotelog.SegmentMetadata, offs remotelog.PartitionOffsets, known bool) {
	offs, ok, err := r.store.Offsets(tp)
	if err != nil || !ok {
		return nil, remotelog.PartitionOffsets{LogStartOffset: -1, HighestTieredOffset: -1}, false
	}
	rows, err = r.store.Segments(tp)
	if err != nil {
		return nil, offs, true
	}
	return rows, offs, true
}

// remoteOnly returns a fresh status of tp with its remote side from the
// metadata store (see remoteCounts).
func (r *reporter) remoteOnly(tp remotelog.TopicPartition) remotelog.PartitionStatus {
	st := baseStatus(tp, "", r.now().UnixMilli())
	if rows, offs, known := r.readRemote(tp); known {
		remoteCounts(&st, rows, offs)
	}
	return st
}

// endPass records the statuses of the partitions the pass did not sync
// (held while scanning, or remote only), forgets partitions that are gone,
// and counts the pass; failed says the pass is not a success (see
// failedPartition).
func (r *reporter) endPass(parts []*partition, failed bool) {
	seen := map[remotelog.TopicPartition]bool{}
	for _, p := range parts {
		seen[p.tp] = true
	}
	r.st.mu.Lock()
	waits := r.st.waits
	r.st.mu.Unlock()
	extra := map[remotelog.TopicPartition]remotelog.PartitionStatus{}
	for tp, w := range waits {
		if !seen[tp] {
			st := r.remoteOnly(tp)
			st.State, st.Reason, st.Held, st.Detail = remotelog.TierWaiting, w.reason, w.held, w.detail
			extra[tp] = st
		}
	}
	if tps, err := r.store.Partitions(); err == nil {
		for _, tp := range tps {
			if seen[tp] || waits[tp].reason != "" || !r.tiered(tp) {
				continue
			}
			st := r.remoteOnly(tp)
			st.State = remotelog.TierRemoteOnly
			st.Detail = "no live partition directory in the log dirs: nothing to copy; its remote copies stay as they are"
			extra[tp] = st
		}
	}
	nowMs := r.now().UnixMilli()
	dw := r.deletionWaitStatuses()
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	for tp := range r.st.parts {
		if !seen[tp] {
			delete(r.st.parts, tp)
		}
	}
	for tp, st := range dw {
		extra[tp] = st
	}
	for tp, st := range extra {
		r.st.parts[tp] = st
		r.log.Debug("partition pass decided", "partition", tp, "state", st.State, "reason", st.Reason, "detail", st.Detail)
	}
	r.st.passes++
	r.st.lastPassMs = nowMs
	if !failed {
		r.st.lastSuccessMs = nowMs
	}
}

// noteDeletionWait records that tp's due deletion waits this pass, with
// the sentence its status gets (see waitForConfigs).
func (r *reporter) noteDeletionWait(tp remotelog.TopicPartition, detail string) {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	r.st.deletionWaits[tp] = detail
}

// deletionWaitStatuses returns, for the partitions whose deletion waits
// this pass (see waitForConfigs), their status: the last pass's, or a
// fresh one, waiting with tiering_disabled and the reason in the detail.
// The caller does not hold r.st.mu.
func (r *reporter) deletionWaitStatuses() map[remotelog.TopicPartition]remotelog.PartitionStatus {
	r.st.mu.Lock()
	waits := r.st.deletionWaits
	prev := map[remotelog.TopicPartition]remotelog.PartitionStatus{}
	for tp := range waits {
		if st, ok := r.st.parts[tp]; ok {
			prev[tp] = st
		}
	}
	r.st.mu.Unlock()
	out := map[remotelog.TopicPartition]remotelog.PartitionStatus{}
	for tp, detail := range waits {
		st, ok := prev[tp]
		if !ok {
			st = r.remoteOnly(tp)
		}
		st.State, st.Reason, st.Held, st.Detail, st.Copying = remotelog.TierWaiting, remotelog.WaitTieringDisabled, "", detail, nil
		out[tp] = st
	}
	return out
}

// gated marks every known partition waiting for reason, because the gate
// said err before a pass: those the last pass left a status for keep
// their counts; those only found in the log dirs now (parts) get a fresh
// one.
func (r *reporter) gated(parts []*partition, reason remotelog.WaitReason, err error) {
	detail := gateDetail(reason, err)
	nowMs := r.now().UnixMilli()
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	for _, p := range parts {
		if _, ok := r.st.parts[p.tp]; !ok {
			r.st.parts[p.tp] = baseStatus(p.tp, p.dir, nowMs)
		}
	}
	for tp, st := range r.st.parts {
		st.State, st.Reason, st.Held, st.Detail, st.Error, st.Copying = remotelog.TierWaiting, reason, "", detail, err.Error(), nil
		st.UpdatedMs = nowMs
		r.st.parts[tp] = st
	}
	r.log.Debug("pass skipped: every partition waits", "reason", reason, "partitions", len(r.st.parts), "err", err)
}

// noteSkipped logs the Kafka internal topics seen for the first time
// (once each, listed together): they are never tiered.
func (r *reporter) noteSkipped(topics map[string]bool) {
	var fresh []string
	r.st.mu.Lock()
	for t := range topics {
		if !r.st.skipped[t] {
			r.st.skipped[t] = true
			fresh = append(fresh, t)
		}
	}
	r.st.mu.Unlock()
	if len(fresh) > 0 {
		sort.Strings(fresh)
		r.log.Info("Kafka internal topics are never tiered; skipping them", "topics", fresh)
	}
}

// status is Copier.Status: the last pass's statuses with the copies in
// flight now, every partition waiting for the gate's reason while the
// gate says passes must wait.
func (r *reporter) status() remotelog.TieringStatus {
	reason, gerr := r.env()
	out := r.lastStatus()
	if gerr != nil {
		detail := gateDetail(reason, gerr)
		for i := range out.Partitions {
			p := &out.Partitions[i]
			if p.State == remotelog.TierWaiting && p.Reason == reason {
				continue // the pass said so already, maybe with more (the copy's error)
			}
			p.State, p.Reason, p.Held, p.Detail, p.Error, p.Copying = remotelog.TierWaiting, reason, "", detail, gerr.Error(), nil
		}
	}
	return out
}

// lastStatus is the status as the last pass left it, with the copies in
// flight now.
func (r *reporter) lastStatus() remotelog.TieringStatus {
	nowMs := r.now().UnixMilli()
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	out := remotelog.TieringStatus{Running: true, Passes: r.st.passes, LastPassMs: r.st.lastPassMs, LastSuccessMs: r.st.lastSuccessMs}
	for t := range r.st.skipped {
		out.SkippedTopics = append(out.SkippedTopics, t)
	}
	sort.Strings(out.SkippedTopics)
	for tp, st := range r.st.parts {
		if in := r.st.inflight[tp]; in != nil {
			st = copyingStatus(st, in)
		}
		out.Partitions = append(out.Partitions, st)
	}
	for tp, in := range r.st.inflight {
		if _, ok := r.st.parts[tp]; !ok { // the first pass over it
			out.Partitions = append(out.Partitions, copyingStatus(baseStatus(tp, "", nowMs), in))
		}
	}
	sortStatuses(out.Partitions)
	return out
}

// startCopy marks a copy of s (size bytes of .log) in flight until the
// returned function is called.
func (r *reporter) startCopy(tp remotelog.TopicPartition, s localSegment, size int64) (*inflightCopy, func()) {
	in := &inflightCopy{prog: remotelog.CopyProgress{BaseOffset: s.base, EndOffset: s.end, Bytes: size, StartedMs: r.now().UnixMilli()}}
	r.st.mu.Lock()
	r.st.inflight[tp] = in
	r.st.mu.Unlock()
	return in, func() {
		r.st.mu.Lock()
		delete(r.st.inflight, tp)
		r.st.mu.Unlock()
	}
}
