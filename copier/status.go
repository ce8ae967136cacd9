package copier

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// statusState is what Status reports, kept as each pass decides it.
type statusState struct {
	mu            sync.Mutex
	waits         map[remotelog.TopicPartition]waitNote                  // this pass's reasons not to copy, first one wins
	parts         map[remotelog.TopicPartition]remotelog.PartitionStatus // as the last pass over each partition left it
	inflight      map[remotelog.TopicPartition]*inflightCopy
	skipped       map[string]bool                     // Kafka internal topics seen in the log dirs
	deletionWaits map[remotelog.TopicPartition]string // this pass's deletions waiting for topic configs (deletionwait.go)
	passes        int64
	lastPassMs    int64
	lastSuccessMs int64
}

func newStatusState() *statusState {
	return &statusState{waits: map[remotelog.TopicPartition]waitNote{}, parts: map[remotelog.TopicPartition]remotelog.PartitionStatus{},
		inflight: map[remotelog.TopicPartition]*inflightCopy{}, skipped: map[string]bool{}, lastPassMs: -1, lastSuccessMs: -1,
		deletionWaits: map[remotelog.TopicPartition]string{}}
}

// waitNote is a decision not to copy a partition this pass, and why.
type waitNote struct {
	reason remotelog.WaitReason
	held   string // the hold reason, with WaitHeld
	detail string
}

// inflightCopy is a copy being made; sent is updated by the upload.
type inflightCopy struct {
	prog remotelog.CopyProgress
	sent atomic.Int64
}

// wait records why a partition is not copied this pass (the first reason
// given in a pass stands).
func (c *Copier) wait(tp remotelog.TopicPartition, reason remotelog.WaitReason, detail string) {
	c.waitHeld(tp, reason, "", detail)
}

func (c *Copier) waitHeld(tp remotelog.TopicPartition, reason remotelog.WaitReason, held, detail string) {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	if _, ok := c.st.waits[tp]; !ok {
		c.st.waits[tp] = waitNote{reason: reason, held: held, detail: detail}
	}
}

// beginPass forgets the last pass's decisions.
func (c *Copier) beginPass() {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	c.st.waits = map[remotelog.TopicPartition]waitNote{}
	c.st.deletionWaits = map[remotelog.TopicPartition]string{}
}

// syncReported syncs one partition, then records its status and logs, at
// debug level, what the pass decided for it and why.
// It returns the status too.
func (c *Copier) syncReported(ctx context.Context, p *partition) (int, remotelog.PartitionStatus, error) {
	n, err := c.syncPartition(ctx, p)
	st := c.partitionStatus(p, err)
	c.st.mu.Lock()
	c.st.parts[p.tp] = st
	c.st.mu.Unlock()
	c.log.Debug("partition pass decided", "partition", p.tp, "state", st.State, "reason", st.Reason, "detail", st.Detail,
		"copied", n, "pending_segments", st.PendingSegments, "pending_bytes", st.PendingBytes, "err", err)
	return n, st, err
}

// waitsNotFails are the reasons a partition waits that are not failures
// of the pass: they hold until the broker, the cluster, another tierd, an
// operator or a configuration changes something, whatever tierd does. A
// pass whose partitions' only errors come with these reasons is a
// success (tierd_copier_last_success_timestamp_seconds).
var waitsNotFails = map[remotelog.WaitReason]bool{
	remotelog.WaitHeld: true, remotelog.WaitLeaseHeld: true, remotelog.WaitNotLeader: true, remotelog.WaitHighWatermark: true,
	remotelog.WaitNotInCheckpoint: true, remotelog.WaitTieringDisabled: true, remotelog.WaitCorruptSegment: true, remotelog.WaitNotCleaned: true,
}

// waitsFail are the reasons a partition waits that fail the pass even
// without an error: the cluster, the object store or the metadata dir
// does not answer, so the pass could not do its work.
var waitsFail = map[remotelog.WaitReason]bool{
	remotelog.WaitClusterUnreachable: true, remotelog.WaitStoreUnreachable: true, remotelog.WaitMetadataUnwritable: true,
}

// failedPartition reports whether a partition's pass failed: its status
// waits for one of waitsFail, or it returned an error and its status
// does not wait for one of waitsNotFails.
func failedPartition(st remotelog.PartitionStatus, err error) bool {
	if st.State == remotelog.TierWaiting && waitsFail[st.Reason] {
		return true
	}
	return err != nil && !(st.State == remotelog.TierWaiting && waitsNotFails[st.Reason])
}

// endPass records the statuses of the partitions the pass did not sync
// (held while scanning, or remote only), forgets partitions that are gone,
// and counts the pass; failed says the pass is not a success (see
// failedPartition).
func (c *Copier) endPass(parts []*partition, failed bool) {
	seen := map[remotelog.TopicPartition]bool{}
	for _, p := range parts {
		seen[p.tp] = true
	}
	c.st.mu.Lock()
	waits := c.st.waits
	c.st.mu.Unlock()
	extra := map[remotelog.TopicPartition]remotelog.PartitionStatus{}
	for tp, w := range waits {
		if !seen[tp] {
			st := c.baseStatus(tp, "")
			c.fillRemote(&st)
			st.State, st.Reason, st.Held, st.Detail = remotelog.TierWaiting, w.reason, w.held, w.detail
			extra[tp] = st
		}
	}
	if tps, err := c.store.Partitions(); err == nil {
		for _, tp := range tps {
			if seen[tp] || waits[tp].reason != "" || !c.tiered(tp) {
				continue
			}
			st := c.baseStatus(tp, "")
			c.fillRemote(&st)
			st.State = remotelog.TierRemoteOnly
			st.Detail = "no live partition directory in the log dirs: nothing to copy; its remote copies stay as they are"
			extra[tp] = st
		}
	}
	nowMs := c.now().UnixMilli()
	dw := c.deletionWaitStatuses()
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	for tp := range c.st.parts {
		if !seen[tp] {
			delete(c.st.parts, tp)
		}
	}
	for tp, st := range dw {
		extra[tp] = st
	}
	for tp, st := range extra {
		c.st.parts[tp] = st
		c.log.Debug("partition pass decided", "partition", tp, "state", st.State, "reason", st.Reason, "detail", st.Detail)
	}
	c.st.passes++
	c.st.lastPassMs = nowMs
	if !failed {
		c.st.lastSuccessMs = nowMs
	}
}

// Status returns every partition's status as the last pass left it, with
// the copies in flight now: a value for tools, the status page and
// metrics. While the gate (see WithGate) says passes must wait, every
// partition shows as waiting for the gate's reason at once, not only
// after the next pass: a bucket watch or a metadata store turning down
// between passes shows in the status as soon as it does in readiness.
func (c *Copier) Status() remotelog.TieringStatus {
	reason, gerr := c.environment()
	out := c.lastStatus()
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

// lastStatus is Status as the last pass left it, with the copies in
// flight now.
func (c *Copier) lastStatus() remotelog.TieringStatus {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	out := remotelog.TieringStatus{Running: true, Passes: c.st.passes, LastPassMs: c.st.lastPassMs, LastSuccessMs: c.st.lastSuccessMs}
	for t := range c.st.skipped {
		out.SkippedTopics = append(out.SkippedTopics, t)
	}
	sort.Strings(out.SkippedTopics)
	for tp, st := range c.st.parts {
		if in := c.st.inflight[tp]; in != nil {
			st = copyingStatus(st, in)
		}
		out.Partitions = append(out.Partitions, st)
	}
	for tp, in := range c.st.inflight {
		if _, ok := c.st.parts[tp]; !ok { // the first pass over it
			out.Partitions = append(out.Partitions, copyingStatus(c.baseStatus(tp, ""), in))
		}
	}
	sortStatuses(out.Partitions)
	return out
}

func sortStatuses(ps []remotelog.PartitionStatus) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
}

func copyingStatus(st remotelog.PartitionStatus, in *inflightCopy) remotelog.PartitionStatus {
	prog := in.prog
	prog.SentBytes = in.sent.Load()
	st.State, st.Reason, st.Held, st.Copying = remotelog.TierCopying, "", "", &prog
	st.Detail = fmt.Sprintf("copying segment %d-%d: %d of %d bytes read for upload", prog.BaseOffset, prog.EndOffset, prog.SentBytes, prog.Bytes)
	return st
}

// startCopy marks a copy in flight until the returned function is called.
func (c *Copier) startCopy(tp remotelog.TopicPartition, s localSegment, size int64) (*inflightCopy, func()) {
	in := &inflightCopy{prog: remotelog.CopyProgress{BaseOffset: s.base, EndOffset: s.end, Bytes: size, StartedMs: c.now().UnixMilli()}}
	c.st.mu.Lock()
	c.st.inflight[tp] = in
	c.st.mu.Unlock()
	return in, func() {
		c.st.mu.Lock()
		delete(c.st.inflight, tp)
		c.st.mu.Unlock()
	}
}

func (c *Copier) baseStatus(tp remotelog.TopicPartition, dir string) remotelog.PartitionStatus {
	return remotelog.PartitionStatus{Topic: tp.Topic, Partition: tp.Partition, Dir: dir, LocalLogStartOffset: -1, ActiveBaseOffset: -1,
		HighWatermark: -1, LogStartOffset: -1, HighestTieredOffset: -1, LastCopyMs: -1, UpdatedMs: c.now().UnixMilli()}
}

// fillRemote sets the remote side of a status from the metadata store
// and returns the finished copies and the offsets (ok false: the store
// does not know the partition).
func (c *Copier) fillRemote(st *remotelog.PartitionStatus) (fin []remotelog.SegmentMetadata, offs remotelog.PartitionOffsets, ok bool) {
	tp := remotelog.TopicPartition{Topic: st.Topic, Partition: st.Partition}
	offs, ok, err := c.store.Offsets(tp)
	if err != nil || !ok {
		return nil, remotelog.PartitionOffsets{LogStartOffset: -1, HighestTieredOffset: -1}, false
	}
	st.LogStartOffset, st.HighestTieredOffset = offs.LogStartOffset, offs.HighestTieredOffset
	rows, err := c.store.Segments(tp)
	if err != nil {
		return nil, offs, true
	}
	for _, r := range rows {
		switch r.State {
		case remotelog.DeleteSegmentFinished:
			continue
		case remotelog.CopySegmentFinished:
			fin = append(fin, r)
			st.RemoteSegments++
			st.RemoteBytes += r.SizeInBytes
			if r.Damaged != "" {
				if st.DamagedCopies++; st.Damaged == "" {
					st.Damaged = fmt.Sprintf("base offset %d: %s", r.StartOffset, r.Damaged)
				}
			}
			st.LastCopyMs = max(st.LastCopyMs, r.EventTimestampMs)
			if r.EndOffset < offs.LogStartOffset {
				st.DeleteLagSegments++
				st.DeleteLagBytes += r.SizeInBytes
			}
		case remotelog.DeleteSegmentStarted:
			st.DeleteLagSegments++
			st.DeleteLagBytes += r.SizeInBytes
		}
		st.MetadataRows++
	}
	return fin, offs, true
}

// pending returns the rolled segments copyRolled would copy if nothing
// stopped it: at or above the log start offset, without a finished copy
// (or with only a damaged one), oldest first.
func pending(segs []localSegment, fin []remotelog.SegmentMetadata, offs remotelog.PartitionOffsets) []localSegment {
	var out []localSegment
	for _, s := range segs {
		if s.active() {
			break
		}
		if s.end < offs.LogStartOffset {
			continue
		}
		if !damagedExactly(fin, s) && (covered(fin, s) || s.end <= offs.HighestTieredOffset) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// partitionStatus says what a pass over p decided and why; err is what
// the pass returned for it.
func (c *Copier) partitionStatus(p *partition, err error) remotelog.PartitionStatus {
	st := c.baseStatus(p.tp, p.dir)
	if p.hwKnown {
		st.HighWatermark = p.hw
	}
	for _, s := range p.segs {
		st.LocalSegments++
		st.LocalBytes += s.size
		if s.active() {
			st.ActiveBaseOffset = s.base
		}
	}
	if len(p.segs) > 0 {
		st.LocalLogStartOffset = p.segs[0].base
	}
	fin, offs, _ := c.fillRemote(&st)
	todo := pending(p.segs, fin, offs)
	for _, s := range todo {
		st.PendingSegments++
		st.PendingBytes += s.size
	}
	if err != nil {
		st.Error = err.Error()
	}
	c.st.mu.Lock()
	w, waiting := c.st.waits[p.tp]
	c.st.mu.Unlock()
	blocking := p.copyErr
	if !p.copyDone {
		blocking = err // the pass stopped before copying
	}
	st.State = remotelog.TierWaiting
	switch {
	case waiting:
		st.Reason, st.Held, st.Detail = w.reason, w.held, w.detail
	case blocking != nil:
		st.Reason, st.Detail = blockedBy(blocking, todo)
		if st.Reason == remotelog.WaitCopyFailed || st.Reason == remotelog.WaitStoreUnreachable {
			st.Reason, st.Detail = c.blockedByEnvironment(st.Reason, st.Detail, blocking)
		}
	case len(todo) > 0 && p.hwKnown && todo[0].end >= p.hw && !p.inCheckpoint:
		st.Reason = remotelog.WaitNotInCheckpoint
		st.Detail = fmt.Sprintf("the partition has no entry in the log dir's %s, so none of its offsets counts as committed: %d rolled segments (%d bytes) wait until the broker checkpoints it",
			filepath.Join(p.logDir(), kafkalog.ReplicationOffsetCheckpointFile), st.PendingSegments, st.PendingBytes)
	case len(todo) > 0 && p.hwKnown && todo[0].end >= p.hw:
		st.Reason = remotelog.WaitHighWatermark
		st.Detail = fmt.Sprintf("the high watermark %d (%s) does not pass the last offset %d of the next segment (base offset %d): it is copied once the broker commits its offsets",
			p.hw, kafkalog.ReplicationOffsetCheckpointFile, todo[0].end, todo[0].base)
	case len(todo) > 0 && p.policy.Compact && !p.cleanedThrough(todo[0]):
		st.Reason = remotelog.WaitNotCleaned
		st.Detail = p.notCleanedDetail(todo[0], st.PendingSegments, st.PendingBytes)
	case len(todo) > 0:
		st.Reason = remotelog.WaitNextPass
		st.Detail = fmt.Sprintf("%d rolled segments (%d bytes) wait for the next pass: this one ended before copying them", st.PendingSegments, st.PendingBytes)
	default:
		st.State = remotelog.TierUpToDate
		st.Detail = "every rolled segment has a finished copy"
		if st.LocalSegments <= 1 && st.RemoteSegments == 0 {
			st.Detail = "no rolled segment yet"
		}
		if st.ActiveBaseOffset >= 0 {
			st.Detail += fmt.Sprintf("; the active segment (base offset %d) is copied once the broker rolls it", st.ActiveBaseOffset)
		}
	}
	if d := c.retentionWaitDetail(p); d != "" {
		st.Detail += "; " + d
	}
	if p.brokerOwned {
		st.Detail += "; its local files are the broker's (" + ownerText(p) + "): tierd deletes none of them"
	}
	return st
}

// ownerText says in a few words why p's local files are the broker's.
func ownerText(p *partition) string {
	if p.owner != "" {
		return p.owner
	}
	return p.ownedWhy
}

// blockedBy names the reason a failed pass gives for the segments it did
// not copy.
func blockedBy(err error, todo []localSegment) (remotelog.WaitReason, string) {
	next := "the next segment"
	if len(todo) > 0 {
		next = fmt.Sprintf("segment %d", todo[0].base)
	}
	var ce *kafkalog.CorruptionError
	switch {
	case errors.Is(err, errCorruptSegment) && errors.As(err, &ce):
		return remotelog.WaitCorruptSegment, fmt.Sprintf("%s is corrupt at byte %d (%s): it is kept locally and not copied, and the later segments wait behind it",
			next, ce.Position, ce.Reason)
	case errors.Is(err, errCorruptSegment):
		return remotelog.WaitCorruptSegment, fmt.Sprintf("%s is corrupt (%v): it is kept locally and not copied, and the later segments wait behind it", next, err)
	case errors.Is(err, context.Canceled):
		return remotelog.WaitNextPass, fmt.Sprintf("the pass was cancelled (tierd is stopping) before %s was copied", next)
	case errors.Is(err, errInstanceConflict):
		return remotelog.WaitLeaseHeld, err.Error()
	case unreachable(err):
		return remotelog.WaitStoreUnreachable, fmt.Sprintf("the object store did not answer (%v); the next pass retries", err)
	}
	return remotelog.WaitCopyFailed, fmt.Sprintf("the pass failed before %s was copied (%v); the next pass retries", next, err)
}

// blockedByEnvironment returns the reason and detail of a copy that
// failed while the gate says the object store is down or the metadata
// dir takes no writes: that, with the gate's error, rather than what the
// copy's own error suggests; else reason and detail as they are.
func (c *Copier) blockedByEnvironment(reason remotelog.WaitReason, detail string, err error) (remotelog.WaitReason, string) {
	env, eerr := c.environment()
	switch env {
	case remotelog.WaitStoreUnreachable:
		return env, fmt.Sprintf("the object store does not answer tierd's probe (%v); the copy failed (%v); the next pass retries once it answers", eerr, err)
	case remotelog.WaitMetadataUnwritable:
		return env, fmt.Sprintf("the metadata dir takes no writes (%v); the copy failed (%v); the next pass retries once it does", eerr, err)
	}
	return reason, detail
}

// unreachable reports whether err says a server could not be reached or
// dropped the connection, rather than answering.
func unreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.Is(err, rsm.ErrUnreachable) || errors.As(err, &oe) || errors.As(err, &de) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) || (errors.As(err, &ne) && ne.Timeout())
}
