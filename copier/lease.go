package copier

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// errInstanceConflict refuses a partition whose lease another tierd holds
// under this tierd's broker id.
var errInstanceConflict = errors.New("copier: another tierd with the same broker_id holds the ownership lease")

// heldLease is a lease this tierd wrote, as it wrote it.
type heldLease struct {
	renewed time.Time // by this tierd's clock
	lease   rsm.Lease
}

// claim decides whether this tierd may work on a partition now, by the
// ownership lease in the bucket (see rsm.Owner): several tierds, one per
// broker, can share a bucket while each partition has one writer. With
// OwnershipLease 0 every partition is ours. Otherwise:
//   - a lease held by another tierd (not released, renewed within
//     OwnershipLease) makes the partition someone else's for this pass;
//     when that tierd has this tierd's broker id, the partition fails with
//     errInstanceConflict;
//   - an absent lease is created only if still absent, and any other lease
//     (ours, or another tierd's that expired or was released) is replaced
//     only at the version read, so of two tierds racing for a lease
//     exactly one writes it; the loser leaves the partition alone for
//     this pass;
//   - ours is renewed every third of the lease;
//   - after taking a lease over from another tierd, the rows are brought
//     in line with the bucket (reconcile) before the lease is used, and
//     the lease says so until that is done, so a crash in between is
//     repaired after the restart.
func (c *Copier) claim(ctx context.Context, tp remotelog.TopicPartition) (bool, error) {
	lease := c.cfg.OwnershipLease
	if lease <= 0 {
		return true, nil
	}
	now := c.now()
	c.stateMu.Lock()
	h, held := c.leases[tp]
	c.stateMu.Unlock()
	if held && now.Sub(h.renewed) < lease/3 {
		return true, nil
	}
	c.dropLease(tp) // until written again
	cur, ok, err := c.rs.ReadLease(ctx, tp)
	if err != nil {
		return false, fmt.Errorf("read ownership lease: %w", err)
	}
	mine := rsm.Owner{BrokerID: c.cfg.BrokerID, InstanceID: c.cfg.InstanceID, RenewedMs: now.UnixMilli()}
	var wrote rsm.Lease
	var point string
	switch {
	case !ok:
		wrote, err = c.rs.CreateLease(ctx, tp, mine)
		point = "lease.created"
	case cur.BrokerID == mine.BrokerID && cur.InstanceID == mine.InstanceID:
		mine.Reconcile = cur.Reconcile // a takeover that was not finished
		wrote, err = c.rs.ReplaceLease(ctx, tp, cur, mine)
		point = "lease.renewed"
	case !cur.Released && now.Sub(time.UnixMilli(cur.RenewedMs)) < lease:
		if cur.BrokerID == mine.BrokerID && cur.InstanceID != "" {
			return false, c.instanceConflict(tp, cur.Owner, now)
		}
		if cur.BrokerID == mine.BrokerID {
			// Written by a tierd of this broker id from before instance
			// ids: taken as this tierd's own, with a reconcile in case
			// it was not.
			c.log.Warn("ownership lease of this broker_id has no instance id (written by an older tierd); taking it as this tierd's", "partition", tp, "broker_id", cur.BrokerID)
			mine.Reconcile = true
			wrote, err = c.rs.ReplaceLease(ctx, tp, cur, mine)
			point = "lease.taken"
			break
		}
		c.wait(tp, remotelog.WaitLeaseHeld, fmt.Sprintf("another tierd (broker_id %d, instance %s) holds the partition's ownership lease, renewed %s ago; it tiers the partition while the lease lasts (ownership_lease %s)",
			cur.BrokerID, cur.InstanceID, now.Sub(time.UnixMilli(cur.RenewedMs)).Round(time.Second), lease))
		if c.once(fmt.Sprintf("owned %s %d %s", tp, cur.BrokerID, cur.InstanceID)) {
			c.log.Info("partition is tiered by another tierd; skipping it while its lease lasts", "partition", tp,
				"owner_broker_id", cur.BrokerID, "owner_instance_id", cur.InstanceID)
		}
		return false, nil
	default:
		c.log.Warn("taking over a partition whose ownership lease expired or was released", "partition", tp,
			"previous_broker_id", cur.BrokerID, "previous_instance_id", cur.InstanceID, "released", cur.Released)
		mine.Reconcile = true
		wrote, err = c.rs.ReplaceLease(ctx, tp, cur, mine)
		point = "lease.taken"
	}
	if err != nil {
		return false, c.leaseWriteFailed(tp, err)
	}
	crashpoint.Hit(point)
	if wrote.Reconcile {
		// The other owner copied and deleted meanwhile: bring the rows in
		// line with the bucket before acting on them, then say so.
		c.needSweep(tp)
		if err := c.reconcile(ctx, tp); err != nil {
			return false, err
		}
		done := wrote.Owner
		done.Reconcile = false
		if wrote, err = c.rs.ReplaceLease(ctx, tp, wrote, done); err != nil {
			return false, c.leaseWriteFailed(tp, err)
		}
		crashpoint.Hit("lease.reconciled")
	}
	c.stateMu.Lock()
	c.leases[tp] = heldLease{renewed: now, lease: wrote}
	c.stateMu.Unlock()
	return true, nil
}

// leaseWriteFailed turns a failed lease write into claim's answer: a
// failed condition means another tierd wrote the lease first, and the
// partition is left to it for this pass; anything else is an error.
func (c *Copier) leaseWriteFailed(tp remotelog.TopicPartition, err error) error {
	if !errors.Is(err, rsm.ErrPreconditionFailed) {
		return fmt.Errorf("write ownership lease: %w", err)
	}
	c.m.leaseRaces.Inc()
	c.wait(tp, remotelog.WaitLeaseHeld, "another tierd wrote the partition's ownership lease first; the partition is left to it for this pass")
	if c.once(fmt.Sprintf("lease race %s", tp)) {
		c.log.Info("another tierd wrote the partition's ownership lease first; leaving the partition to it for this pass", "partition", tp)
	}
	return nil
}

// instanceConflict reports a lease held, unexpired, by another tierd with
// this tierd's broker id: two tierds were given one broker_id, or one
// runs with two metadata dirs. It is never taken over before it expires.
func (c *Copier) instanceConflict(tp remotelog.TopicPartition, o rsm.Owner, now time.Time) error {
	c.m.instanceConflicts.Inc()
	age := now.Sub(time.UnixMilli(o.RenewedMs)).Round(time.Second)
	c.wait(tp, remotelog.WaitLeaseHeld, fmt.Sprintf("lease held by instance %s with this tierd's broker_id %d (renewed %s ago): stop the other tierd, or give this one its own broker_id",
		o.InstanceID, o.BrokerID, age))
	if c.once(fmt.Sprintf("instance conflict %s %s", tp, o.InstanceID)) {
		c.log.Error("another tierd with this broker_id holds the partition's ownership lease; stop the other tierd, or give this one its own broker_id",
			"partition", tp, "broker_id", o.BrokerID, "holder_instance_id", o.InstanceID, "instance_id", c.cfg.InstanceID, "renewed_ago", age)
	}
	return fmt.Errorf("%w: partition %s is held by instance %s with broker_id %d (renewed %s ago); this tierd is instance %s with the same broker_id. "+
		"Stop the other tierd, or give this one its own broker_id; the lease is not taken over before it expires (ownership_lease %s) or is released",
		errInstanceConflict, tp, o.InstanceID, o.BrokerID, age, c.cfg.InstanceID, c.cfg.OwnershipLease)
}

// releaseLeases gives up, best effort, the leases this tierd holds, each
// only if still at the version it wrote, so that another tierd can take
// the partitions over without waiting for the leases to expire. Run calls
// it when it returns.
func (c *Copier) releaseLeases(ctx context.Context) {
	c.mu.Lock() // no pass is running
	defer c.mu.Unlock()
	c.stateMu.Lock()
	held := c.leases
	c.leases = map[remotelog.TopicPartition]heldLease{}
	c.stateMu.Unlock()
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	n := 0
	for tp, h := range held {
		if _, err := c.rs.ReleaseLease(ctx, tp, h.lease, c.now().UnixMilli()); err != nil {
			c.log.Warn("could not release an ownership lease; it expires after ownership_lease", "partition", tp, "err", err)
			continue
		}
		n++
	}
	c.log.Info("released ownership leases", "released", n, "held", len(held))
}

// reconcile makes the rows of a partition whose store may be stale (it was
// tiered by another tierd) agree with the manifests in the bucket:
// manifests without a row are the other owner's copies, and are taken in.
// A finished row whose manifest the bucket no longer lists was probably
// deleted by the other owner (deletes go manifest first), but a manifest
// lost any other way explains it too: the row is marked damaged, never
// deleted here, so its segment is copied again while it is local and its
// remains go only by this tierd's own retention. It needs every manifest
// to be readable, and fails otherwise.
func (c *Copier) reconcile(ctx context.Context, tp remotelog.TopicPartition) error {
	mfs, err := c.rs.Manifests(ctx, tp)
	if err != nil {
		return fmt.Errorf("reconcile with the bucket: %w", err)
	}
	inBucket := map[remotelog.SegmentID]bool{}
	for _, mf := range mfs {
		inBucket[mf.SegmentID] = true
	}
	off, _, err := c.store.Offsets(tp)
	if err != nil {
		return err
	}
	if mfs, err = c.adoptable(tp, off.TopicID, mfs); err != nil {
		return err
	}
	rows, err := c.store.Segments(tp)
	if err != nil {
		return err
	}
	known := map[remotelog.SegmentID]bool{}
	for _, r := range rows {
		known[r.ID] = true
		if r.State == remotelog.CopySegmentFinished && !inBucket[r.ID] && r.Damaged == "" {
			if _, err := c.store.MarkDamaged(tp, r.StartOffset, r.ID, "manifest missing from the bucket"); err != nil {
				return err
			}
			c.m.damaged.Inc()
			c.log.Warn("a finished copy's manifest is gone from the bucket: the copy is marked damaged, nothing is deleted",
				"partition", tp, "base_offset", r.StartOffset, "segment", r.ID)
		}
	}
	for _, mf := range mfs {
		if !known[mf.SegmentID] {
			if err := c.store.ImportSegment(mf.Metadata()); err != nil {
				return err
			}
			c.m.rebuilt.Inc()
		}
	}
	if fin, err := c.store.FinishedSegments(tp); err == nil && len(fin) > 0 {
		_, err = c.store.AdvanceOffsets(tp, fin[0].StartOffset, -1)
		return err
	}
	return nil
}

func (c *Copier) dropLease(tp remotelog.TopicPartition) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	delete(c.leases, tp)
}
