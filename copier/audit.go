package copier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// maxSuspects bounds the copies queued by readers for a check.
const maxSuspects = 1024

// auditor checks finished copies in the bucket: the copies readers
// reported (suspect), a few more each round taken in turn across the
// partitions a pass worked on (checkCopies), and, right before a local
// segment or a superseded copy goes, the copy that is the proof
// (copyPresent, and checkCopy for the delete protocol and remote
// compaction). A copy with an object missing is marked damaged; a damaged
// copy found whole again is cleared. It is built from narrow
// dependencies, not the copier (see New).
type auditor struct {
	cfg   *Config // the copier's current config: changed only between passes
	now   func() time.Time
	log   *slog.Logger
	store auditStore
	rs    auditBucket
	// gate returns why the store is not known to be up (the copier's
	// gate: WithGate), nil when it is.
	gate func() error
	// checked counts copies checked (tierd_copier_copies_checked_total),
	// damaged copies marked damaged (tierd_copier_damaged_copies_total).
	checked, damaged prometheus.Counter

	mu          sync.Mutex                                        // guards suspects, copyCursor and lastSample
	suspects    map[remotelog.SegmentID]remotelog.SegmentMetadata // copies readers found objects of missing
	copyCursor  map[remotelog.TopicPartition]int                  // next copy to check, per partition
	checkCursor int                                               // next partition to check a copy of (one round at a time: the pass lock)
	lastSample  time.Time                                         // the last round of sampled copy checks (see sampleDue)
}

// auditStore is the metadata store as the auditor uses it (rlmm.Store):
// a partition's finished copies, one copy's row as it is now, and its
// damage mark.
type auditStore interface {
	FinishedSegments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	Segment(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error)
	MarkDamaged(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, reason string) (remotelog.SegmentMetadata, error)
	ClearDamaged(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error)
}

// auditBucket is the bucket as the auditor reads it (rsm.Manager): which
// of a copy's objects are missing, a whole re-read of a copy against its
// manifest, and a fresh check that the store is the one opened.
type auditBucket interface {
	MissingObjects(ctx context.Context, meta remotelog.SegmentMetadata) ([]string, error)
	VerifyCopy(ctx context.Context, meta remotelog.SegmentMetadata) error
	CheckStore(ctx context.Context) error
}

// newAuditor returns an auditor with no copy queued and no round of
// sampled checks made yet.
func newAuditor(cfg *Config, now func() time.Time, log *slog.Logger, store auditStore, rs auditBucket, gate func() error,
	checked, damaged prometheus.Counter) *auditor {
	return &auditor{cfg: cfg, now: now, log: log, store: store, rs: rs, gate: gate, checked: checked, damaged: damaged,
		suspects: map[remotelog.SegmentID]remotelog.SegmentMetadata{}, copyCursor: map[remotelog.TopicPartition]int{}}
}

// SuspectCopy queues a finished copy for a check of its objects on the
// next pass: the remote read engine calls it when a read of the copy found an
// object missing (DATA_LOSS). It never blocks; past maxSuspects queued
// copies it drops the report.
func (c *Copier) SuspectCopy(meta remotelog.SegmentMetadata) { c.audit.suspect(meta) }

// suspect queues meta for a check on the next pass (see SuspectCopy).
func (a *auditor) suspect(meta remotelog.SegmentMetadata) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.suspects) < maxSuspects {
		a.suspects[meta.ID] = meta
	}
}

// sampleDue reports whether a round of sampled copy checks is due (at
// most one per CopyCheckIntervalMs) and, when it is, starts the interval
// over.
func (a *auditor) sampleDue() bool {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.lastSample.IsZero() && now.Sub(a.lastSample).Milliseconds() < a.cfg.CopyCheckIntervalMs {
		return false
	}
	a.lastSample = now
	return true
}

// samplePartitions returns the partitions a round of sampled checks
// takes from owned (sorted by name): min(perRound, len(owned)) of them,
// in turn from the one after cursor (owned[(cursor+1) % len(owned)],
// then the next, wrapping round), and the cursor after them (that of
// the last one taken). None from an empty owned or perRound <= 0, cursor
// unchanged.
func samplePartitions(owned []remotelog.TopicPartition, cursor, perRound int) ([]remotelog.TopicPartition, int) {
	n := len(owned)
	if n == 0 || perRound <= 0 {
		return nil, cursor
	}
	out := make([]remotelog.TopicPartition, 0, min(perRound, n))
	for k := 0; k < min(perRound, n); k++ {
		cursor++
		out = append(out, owned[cursor%n])
	}
	return out, cursor
}

// sampleCopies returns the copies of one partition a round of sampled
// checks takes from fin, its finished copies: fin[cursor % len(fin)],
// then the first other copy marked damaged for missing objects
// (recheckable), if any; and the partition's cursor after (the index
// taken, plus one). None from an empty fin, cursor unchanged.
func sampleCopies(fin []remotelog.SegmentMetadata, cursor int) ([]remotelog.SegmentMetadata, int) {
	if len(fin) == 0 {
		return nil, cursor
	}
	i := cursor % len(fin)
	out := []remotelog.SegmentMetadata{fin[i]}
	for j, r := range fin {
		if j != i && recheckable(r.Damaged) {
			out = append(out, r)
			break
		}
	}
	return out, i + 1
}

// checkCopies checks, once per pass, the copies readers reported and, at
// most once per CopyCheckIntervalMs, CopyChecksPerPass more taken in turn
// across the partitions this tierd tiers (one copy of each of the next partitions, and that partition's
// first copy marked damaged for missing objects, if any), so every copy
// is looked at now and then for the cost of a few requests per pass. A
// copy with an object missing is marked damaged (see checkCopy); a
// damaged copy found whole again is cleared. owned is sorted in place.
func (a *auditor) checkCopies(ctx context.Context, owned []remotelog.TopicPartition) error {
	a.mu.Lock()
	todo := make([]remotelog.SegmentMetadata, 0, len(a.suspects)+a.cfg.CopyChecksPerPass)
	for _, m := range a.suspects {
		todo = append(todo, m)
	}
	a.suspects = map[remotelog.SegmentID]remotelog.SegmentMetadata{}
	a.mu.Unlock()
	if len(owned) > 0 && a.cfg.CopyChecksPerPass > 0 && a.sampleDue() {
		sort.Slice(owned, func(i, j int) bool { return owned[i].String() < owned[j].String() })
		var tps []remotelog.TopicPartition
		tps, a.checkCursor = samplePartitions(owned, a.checkCursor, a.cfg.CopyChecksPerPass)
		for _, tp := range tps {
			fin, err := a.store.FinishedSegments(tp)
			if err != nil || len(fin) == 0 {
				continue
			}
			a.mu.Lock()
			picked, next := sampleCopies(fin, a.copyCursor[tp])
			a.copyCursor[tp] = next
			a.mu.Unlock()
			todo = append(todo, picked...)
		}
	}
	var errs []error
	for _, m := range todo {
		if err := a.checkCopy(ctx, m); err != nil {
			errs = append(errs, fmt.Errorf("%s: check copy %s: %w", m.TopicPartition, m.ID, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d copy checks failed: %w", len(errs), errs[0])
	}
	return nil
}

// checkCopy checks that copy m's objects are all in the bucket. A copy
// with objects missing is marked damaged: it is reported, it no longer
// lets a local segment be deleted, and its segment is copied again while
// it is on local disk (the new copy then supersedes it). It marks only
// while the store is up: the gate passes (tierd's probe of the bucket
// succeeded) and a fresh check of the store (rsm.Manager.CheckStore: a
// filesystem bucket's root directory is the one opened) succeeds, so a
// store that is down or unmounted never reads as objects missing. A
// damaged copy whose objects are all present again is re-read whole; when
// every object's size and checksum match its manifest the mark is cleared
// (logged), else the reason becomes a checksum mismatch, which stays.
func (a *auditor) checkCopy(ctx context.Context, m remotelog.SegmentMetadata) error {
	missing, err := a.rs.MissingObjects(ctx, m)
	if err != nil {
		return err
	}
	a.checked.Inc()
	cur, err := a.store.Segment(m.TopicPartition, m.StartOffset, m.ID)
	if err != nil || cur.State != remotelog.CopySegmentFinished {
		return nil // deleted meanwhile
	}
	if len(missing) == 0 {
		if recheckable(cur.Damaged) {
			return a.recheckDamaged(ctx, cur)
		}
		return nil
	}
	reason := damagedMissing + strings.Join(missing, " ")
	if cur.Damaged == reason {
		return nil // already known
	}
	if gerr := a.gate(); gerr != nil {
		return fmt.Errorf("objects %v not found, but the store is not known to be up; not marking the copy damaged: %w", missing, gerr)
	}
	if err := a.rs.CheckStore(ctx); err != nil {
		return fmt.Errorf("objects %v not found, but the store check fails; not marking the copy damaged: %w", missing, err)
	}
	if _, err := a.store.MarkDamaged(m.TopicPartition, m.StartOffset, m.ID, reason); err != nil {
		return err
	}
	a.damaged.Inc()
	a.log.Error("a finished copy's objects are gone from the bucket: the copy is marked damaged; its segment is copied again if it is still on local disk; the mark clears if a later check finds every object back with its checksum",
		"partition", m.TopicPartition, "base_offset", m.StartOffset, "end_offset", m.EndOffset, "segment", m.ID, "missing", missing)
	return nil
}

// recheckDamaged re-reads a copy marked damaged for missing objects that
// are all present again, and clears the mark when every object matches
// its manifest; a mismatch replaces the reason.
func (a *auditor) recheckDamaged(ctx context.Context, cur remotelog.SegmentMetadata) error {
	err := a.rs.VerifyCopy(ctx, cur)
	switch {
	case err == nil:
		if _, err := a.store.ClearDamaged(cur.TopicPartition, cur.StartOffset, cur.ID); err != nil {
			return err
		}
		a.log.Info("a copy marked damaged is whole again (every object present, sizes and checksums as its manifest records): the mark is cleared",
			"partition", cur.TopicPartition, "base_offset", cur.StartOffset, "end_offset", cur.EndOffset, "segment", cur.ID, "was", cur.Damaged)
		return nil
	case errors.Is(err, rsm.ErrChecksum) || errors.Is(err, rsm.ErrBadManifest):
		if _, merr := a.store.MarkDamaged(cur.TopicPartition, cur.StartOffset, cur.ID, damagedChecksum+err.Error()); merr != nil {
			return merr
		}
		a.log.Error("a copy marked damaged has its objects back, but they differ from its manifest: it stays damaged",
			"partition", cur.TopicPartition, "base_offset", cur.StartOffset, "segment", cur.ID, "err", err)
		return nil
	}
	return fmt.Errorf("re-read the damaged copy: %w", err)
}

// copyPresent checks in the bucket that the exact copy of local segment s
// among fin has all its objects, and marks it damaged when not.
func (a *auditor) copyPresent(ctx context.Context, fin []remotelog.SegmentMetadata, s localSegment) (bool, error) {
	for _, r := range fin {
		if !copiedExactly([]remotelog.SegmentMetadata{r}, s) {
			continue
		}
		if err := a.checkCopy(ctx, r); err != nil {
			return false, fmt.Errorf("check the copy of segment %d before deleting it locally: %w", s.base, err)
		}
		cur, err := a.store.Segment(r.TopicPartition, r.StartOffset, r.ID)
		if err != nil {
			return false, err
		}
		if cur.Damaged == "" {
			return true, nil
		}
	}
	return false, nil
}
