package copier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// errInstanceConflict refuses a partition whose lease another tierd holds
// under this tierd's broker id.
var errInstanceConflict = errors.New("copier: another tierd with the same broker_id holds the ownership lease")

// heldLease is a partition lease this tierd wrote, as it wrote it. It is
// good for as long as this tierd's heartbeat is (see heartbeat).
type heldLease struct {
	lease rsm.Lease
}

// leaseOwner decides by the ownership lease in the bucket: see owns. It
// is the owner when no Kafka cluster is configured.
type leaseOwner struct {
	ownerDeps
	rs     leaseBucket
	mu     sync.Mutex
	leases map[remotelog.TopicPartition]heldLease // ours, as last written; good while hb is fresh
	hb     heartbeatState                         // this tierd's instance heartbeat
}

func newLeaseOwner(d ownerDeps, rs leaseBucket) *leaseOwner {
	return &leaseOwner{ownerDeps: d, rs: rs, leases: map[remotelog.TopicPartition]heldLease{}}
}

func (o *leaseOwner) owns(ctx context.Context, p *partition) (bool, error) { return o.claim(ctx, p.tp) }
func (o *leaseOwner) renew(ctx context.Context, p *partition) (bool, error) {
	return o.claim(ctx, p.tp)
}
func (o *leaseOwner) beginPass() { o.hb.beginPass() }

// held reports whether this tierd holds tp's lease, as last written.
func (o *leaseOwner) held(tp remotelog.TopicPartition) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.leases[tp]
	return ok
}

// heartbeatState is this tierd's instance heartbeat, as last written.
type heartbeatState struct {
	mu      sync.Mutex
	hb      *rsm.HeartbeatVersioned // nil: none written by this process yet
	renewed time.Time               // the RenewedMs written, by this tierd's clock
	pass    uint64                  // passes begun (beginPass)
	failed  error                   // the renewal's error in pass failIn, nil if none failed
	failIn  uint64                  // the pass whose renewal failed
}

// beginPass starts a pass: the heartbeat is tried again, once, in it.
func (h *heartbeatState) beginPass() {
	h.mu.Lock()
	h.pass++
	h.mu.Unlock()
}

// claim decides whether this tierd may work on a partition now, by the
// ownership lease in the bucket (see rsm.Owner and the protocol in
// doc.go): several tierds, one per broker, can share a bucket while each
// partition has one writer. With OwnershipLease 0 every partition is
// ours. Otherwise:
//   - this tierd's heartbeat is renewed every third of the lease (one
//     request for all its partitions); a partition lease it wrote counts
//     only while the heartbeat is that fresh;
//   - a lease held by another tierd (not released, it or its heartbeat
//     renewed within OwnershipLease) makes the partition someone else's
//     for this pass; when that tierd has this tierd's broker id, the
//     partition fails with errInstanceConflict;
//   - an absent lease is created only if still absent, and any other lease
//     (ours from before a restart, or another tierd's that expired or was
//     released) is replaced only at the version read, so of two tierds
//     racing for a lease exactly one writes it; the loser leaves the
//     partition alone for this pass;
//   - after taking a lease over from another tierd, the rows are brought
//     in line with the bucket (reconcile) before the lease is used, and
//     the lease says so until that is done, so a crash in between is
//     repaired after the restart.
func (o *leaseOwner) claim(ctx context.Context, tp remotelog.TopicPartition) (bool, error) {
	lease := o.cfg.OwnershipLease
	if lease <= 0 {
		return true, nil
	}
	now := o.now()
	if err := o.heartbeat(ctx, now); err != nil {
		return false, err
	}
	if o.held(tp) {
		return true, nil
	}
	cur, ok, err := o.rs.ReadLease(ctx, tp)
	if err != nil {
		return false, fmt.Errorf("read ownership lease: %w", err)
	}
	mine := rsm.Owner{BrokerID: o.cfg.BrokerID, InstanceID: o.cfg.InstanceID, RenewedMs: now.UnixMilli(),
		Heartbeat: rsm.HeartbeatKey(o.cfg.BrokerID, o.cfg.InstanceID)}
	var wrote rsm.Lease
	var point string
	switch {
	case !ok:
		wrote, err = o.rs.CreateLease(ctx, tp, mine)
		point = "lease.created"
	case cur.BrokerID == mine.BrokerID && cur.InstanceID == mine.InstanceID:
		mine.Reconcile = cur.Reconcile // a takeover that was not finished
		wrote, err = o.rs.ReplaceLease(ctx, tp, cur, mine)
		point = "lease.renewed"
	case !cur.Free(now.UnixMilli(), lease.Milliseconds()):
		if cur.BrokerID == mine.BrokerID && cur.InstanceID != "" {
			return false, o.instanceConflict(tp, cur, now)
		}
		if cur.BrokerID == mine.BrokerID {
			// Written by a tierd of this broker id from before instance
			// ids: taken as this tierd's own, with a reconcile in case
			// it was not.
			o.log.Warn("ownership lease of this broker_id has no instance id (written by an older tierd); taking it as this tierd's", "partition", tp, "broker_id", cur.BrokerID)
			mine.Reconcile = true
			wrote, err = o.rs.ReplaceLease(ctx, tp, cur, mine)
			point = "lease.taken"
			break
		}
		o.say.wait(tp, remotelog.WaitLeaseHeld, fmt.Sprintf("another tierd (broker_id %d, instance %s) holds the partition's ownership lease, renewed %s ago; it tiers the partition while the lease lasts (ownership_lease %s)",
			cur.BrokerID, cur.InstanceID, now.Sub(time.UnixMilli(cur.RenewedAtMs())).Round(time.Second), lease))
		if o.say.once(fmt.Sprintf("owned %s %d %s", tp, cur.BrokerID, cur.InstanceID)) {
			o.log.Info("partition is tiered by another tierd; skipping it while its lease lasts", "partition", tp,
				"owner_broker_id", cur.BrokerID, "owner_instance_id", cur.InstanceID)
		}
		return false, nil
	default:
		o.log.Warn("taking over a partition whose ownership lease expired or was released", "partition", tp,
			"previous_broker_id", cur.BrokerID, "previous_instance_id", cur.InstanceID, "released", cur.Released || cur.HeartbeatReleased)
		mine.Reconcile = true
		wrote, err = o.rs.ReplaceLease(ctx, tp, cur, mine)
		point = "lease.taken"
	}
	if err != nil {
		return false, o.leaseWriteFailed(tp, err)
	}
	crashpoint.Hit(point)
	if wrote.Reconcile {
		// The other owner copied and deleted meanwhile: bring the rows in
		// line with the bucket before acting on them, then say so.
		if err := o.takeIn(ctx, tp); err != nil {
			return false, err
		}
		done := wrote.Owner
		done.Reconcile = false
		if wrote, err = o.rs.ReplaceLease(ctx, tp, wrote, done); err != nil {
			return false, o.leaseWriteFailed(tp, err)
		}
		crashpoint.Hit("lease.reconciled")
	}
	o.mu.Lock()
	o.leases[tp] = heldLease{lease: wrote}
	o.mu.Unlock()
	return true, nil
}

// heartbeat renews this tierd's instance heartbeat when it is a third of
// the lease old (or was never written by this process), so that every
// partition lease naming it stays this tierd's: one conditional write per
// third of the lease, however many partitions this tierd holds. Before
// the first write it reads the object, to replace its own heartbeat left
// by an earlier run. The partition leases held in memory are dropped, to
// be read again from the bucket, when the renewal ends two thirds of a
// lease or more after the last one (another tierd may have seen the
// heartbeat expire and taken partitions over, allowing clocks to differ
// by up to a third of the lease), when another writer changed the object,
// and when this process had none yet. A renewal that failed is not
// tried again in the same pass: every partition of the pass gets its
// error (one request per pass, not one per partition, while the bucket
// is down). Errors: the bucket's, wrapped.
func (o *leaseOwner) heartbeat(ctx context.Context, now time.Time) (err error) {
	h := &o.hb
	h.mu.Lock()
	defer h.mu.Unlock()
	lease := o.cfg.OwnershipLease
	if h.hb != nil && now.Sub(h.renewed) < lease/3 {
		return nil
	}
	if h.failed != nil && h.failIn == h.pass {
		return h.failed
	}
	defer func() {
		if err != nil {
			h.failed, h.failIn = err, h.pass
		}
	}()
	prev := h.hb
	if prev == nil {
		cur, ok, err := o.rs.ReadHeartbeat(ctx, o.cfg.BrokerID, o.cfg.InstanceID)
		if err != nil {
			return fmt.Errorf("read instance heartbeat: %w", err)
		}
		if ok {
			prev = &cur
		}
	}
	mine := rsm.Heartbeat{BrokerID: o.cfg.BrokerID, InstanceID: o.cfg.InstanceID, RenewedMs: now.UnixMilli()}
	wrote, err := o.rs.WriteHeartbeat(ctx, prev, mine)
	if err != nil {
		if errors.Is(err, rsm.ErrPreconditionFailed) {
			// Another writer of this instance's heartbeat (a copy of this
			// tierd's metadata dir running elsewhere?): start over from
			// what the bucket holds.
			h.hb = nil
			o.dropLeases()
			o.log.Error("this tierd's instance heartbeat was written by another process; its partition leases are read again", "err", err)
		}
		return fmt.Errorf("renew instance heartbeat: %w", err)
	}
	o.m.heartbeats.Inc()
	if h.hb == nil || o.now().Sub(h.renewed) >= 2*lease/3 {
		o.dropLeases()
	}
	h.hb, h.renewed = &wrote, now
	crashpoint.Hit("lease.heartbeat")
	return nil
}

// leaseWriteFailed turns a failed lease write into claim's answer: a
// failed condition means another tierd wrote the lease first, and the
// partition is left to it for this pass; anything else is an error.
func (o *leaseOwner) leaseWriteFailed(tp remotelog.TopicPartition, err error) error {
	if !errors.Is(err, rsm.ErrPreconditionFailed) {
		return fmt.Errorf("write ownership lease: %w", err)
	}
	o.m.leaseRaces.Inc()
	o.say.wait(tp, remotelog.WaitLeaseHeld, "another tierd wrote the partition's ownership lease first; the partition is left to it for this pass")
	if o.say.once(fmt.Sprintf("lease race %s", tp)) {
		o.log.Info("another tierd wrote the partition's ownership lease first; leaving the partition to it for this pass", "partition", tp)
	}
	return nil
}

// instanceConflict reports a lease held, unexpired, by another tierd with
// this tierd's broker id: two tierds were given one broker_id, or one
// runs with two metadata dirs. It is never taken over before it expires.
func (o *leaseOwner) instanceConflict(tp remotelog.TopicPartition, l rsm.Lease, now time.Time) error {
	o.m.instanceConflicts.Inc()
	age := now.Sub(time.UnixMilli(l.RenewedAtMs())).Round(time.Second)
	o.say.wait(tp, remotelog.WaitLeaseHeld, fmt.Sprintf("lease held by instance %s with this tierd's broker_id %d (renewed %s ago): stop the other tierd, or give this one its own broker_id",
		l.InstanceID, l.BrokerID, age))
	if o.say.once(fmt.Sprintf("instance conflict %s %s", tp, l.InstanceID)) {
		o.log.Error("another tierd with this broker_id holds the partition's ownership lease; stop the other tierd, or give this one its own broker_id",
			"partition", tp, "broker_id", l.BrokerID, "holder_instance_id", l.InstanceID, "instance_id", o.cfg.InstanceID, "renewed_ago", age)
	}
	return fmt.Errorf("%w: partition %s is held by instance %s with broker_id %d (renewed %s ago); this tierd is instance %s with the same broker_id. "+
		"Stop the other tierd, or give this one its own broker_id; the lease is not taken over before it expires (ownership_lease %s) or is released",
		errInstanceConflict, tp, l.InstanceID, l.BrokerID, age, o.cfg.InstanceID, o.cfg.OwnershipLease)
}

// release gives up, best effort, the leases this tierd holds, so
// that another tierd can take the partitions over without waiting for
// them to expire: it marks its heartbeat released (only if still at the
// version it wrote), which releases every partition lease naming it in
// one write.
func (o *leaseOwner) release(ctx context.Context) {
	o.mu.Lock()
	held := len(o.leases)
	o.leases = map[remotelog.TopicPartition]heldLease{}
	o.mu.Unlock()
	o.hb.mu.Lock()
	hb := o.hb.hb
	o.hb.hb = nil
	o.hb.mu.Unlock()
	if hb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rel := hb.Heartbeat
	rel.Released, rel.RenewedMs = true, o.now().UnixMilli()
	if _, err := o.rs.WriteHeartbeat(ctx, hb, rel); err != nil {
		o.log.Warn("could not release the ownership leases; they expire after ownership_lease", "held", held, "err", err)
		return
	}
	o.log.Info("released ownership leases", "held", held)
}

// dropLeases forgets the partition leases held in memory: each is read
// from the bucket again before the partition is worked on.
func (o *leaseOwner) dropLeases() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leases = map[remotelog.TopicPartition]heldLease{}
}
