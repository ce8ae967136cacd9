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

// baseStatus is a partition's status before anything is known of it:
// every offset and time unknown (-1), updated at nowMs.
func baseStatus(tp remotelog.TopicPartition, dir string, nowMs int64) remotelog.PartitionStatus {
	return remotelog.PartitionStatus{Topic: tp.Topic, Partition: tp.Partition, Dir: dir, LocalLogStartOffset: -1, ActiveBaseOffset: -1,
		HighWatermark: -1, LogStartOffset: -1, HighestTieredOffset: -1, LastCopyMs: -1, UpdatedMs: nowMs}
}

// remoteCounts sets the remote side of a status from the partition's
// rows and offsets in the metadata store, and returns its finished
// copies (damaged ones too). DELETE_SEGMENT_FINISHED rows count for
// nothing; a finished copy wholly below the log start offset, and a
// DELETE_SEGMENT_STARTED row, count as delete lag.
// storedSize is the bytes a finished copy's .log takes in the bucket: a
// chunked copy's stored size, once recorded, else its size.
func storedSize(r remotelog.SegmentMetadata) int64 {
	if r.Form != "" && r.StoredSizeInBytes > 0 {
		return r.StoredSizeInBytes
	}
	return r.SizeInBytes
}

func remoteCounts(st *remotelog.PartitionStatus, rows []remotelog.SegmentMetadata, offs remotelog.PartitionOffsets) (fin []remotelog.SegmentMetadata) {
	st.LogStartOffset, st.HighestTieredOffset = offs.LogStartOffset, offs.HighestTieredOffset
	for _, r := range rows {
		switch r.State {
		case remotelog.DeleteSegmentFinished:
			continue
		case remotelog.CopySegmentFinished:
			fin = append(fin, r)
			st.RemoteSegments++
			st.RemoteBytes += r.SizeInBytes
			st.RemoteStoredBytes += storedSize(r)
			if r.Form != "" {
				st.ChunkedSegments++
				if r.Encrypted {
					st.EncryptedSegments++
				}
			}
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
	return fin
}

// statusInputs are what a partition's status after a pass is decided
// from.
type statusInputs struct {
	p    *partition // as the pass left it (segments, checkpoints, copy outcome)
	err  error      // what the pass returned for p
	rows []remotelog.SegmentMetadata
	offs remotelog.PartitionOffsets // -1 each when the store does not know p
	wait *waitNote                  // this pass's first reason not to copy p; nil: none
	// env is the gate's verdict now, asked only when a copy failed (see
	// blockedByEnvironment).
	env       func() (remotelog.WaitReason, error)
	retention string // what retention waits to delete ("" when it does not wait)
	nowMs     int64
}

// partitionStatusOf says what a pass over a partition decided and why:
// the local and remote counts, the segments still to copy, and the state
// with its reason: the pass's own wait note first, then the error that
// stopped the copy, then the checkpoint, the high watermark and the log
// cleaner, else up to date.
func partitionStatusOf(in statusInputs) remotelog.PartitionStatus {
	p, err := in.p, in.err
	st := baseStatus(p.tp, p.dir, in.nowMs)
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
	fin := remoteCounts(&st, in.rows, in.offs)
	todo := pending(p.segs, fin, in.offs)
	for _, s := range todo {
		st.PendingSegments++
		st.PendingBytes += s.size
	}
	if err != nil {
		st.Error = err.Error()
	}
	blocking := p.copyErr
	if !p.copyDone {
		blocking = err // the pass stopped before copying
	}
	st.State = remotelog.TierWaiting
	switch {
	case in.wait != nil:
		st.Reason, st.Held, st.Detail = in.wait.reason, in.wait.held, in.wait.detail
	case blocking != nil:
		st.Reason, st.Detail = blockedBy(blocking, todo)
		if st.Reason == remotelog.WaitCopyFailed || st.Reason == remotelog.WaitStoreUnreachable {
			st.Reason, st.Detail = blockedByEnvironment(st.Reason, st.Detail, blocking, in.env)
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
	if in.retention != "" {
		st.Detail += "; " + in.retention
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
// copy's own error suggests; else reason and detail as they are. env is
// the gate's verdict now (nil: no gate).
func blockedByEnvironment(reason remotelog.WaitReason, detail string, err error, env func() (remotelog.WaitReason, error)) (remotelog.WaitReason, string) {
	if env == nil {
		return reason, detail
	}
	why, eerr := env()
	switch why {
	case remotelog.WaitStoreUnreachable:
		return why, fmt.Sprintf("the object store does not answer tierd's probe (%v); the copy failed (%v); the next pass retries once it answers", eerr, err)
	case remotelog.WaitMetadataUnwritable:
		return why, fmt.Sprintf("the metadata dir takes no writes (%v); the copy failed (%v); the next pass retries once it does", eerr, err)
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
