package copier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// owner decides whether this tierd may act on a partition now. A pass
// asks owns before it works on a partition, and renew before each copy
// and each remote delete; release gives up, best effort, what is held
// when the copier stops. There are two: leaseOwner (the ownership lease
// and instance heartbeat in the bucket, when no Kafka cluster is
// configured) and leaderOwner (the cluster's partition leadership, with
// the bucket's leader-epoch fence). Both report why a partition is not
// theirs through the partitionReporter they are given.
type owner interface {
	owns(ctx context.Context, p *partition) (bool, error)
	renew(ctx context.Context, p *partition) (bool, error)
	beginPass()
	release(ctx context.Context)
}

// partitionReporter is how an owner (and the whole-partition deletions)
// says why a partition waits or is held: the copier's status (wait, hold)
// and its log-once set (once).
type partitionReporter interface {
	wait(tp remotelog.TopicPartition, reason remotelog.WaitReason, detail string)
	hold(tp remotelog.TopicPartition, reason, detail string) error
	once(key string) bool
}

// ownerDeps are what both owners are built from.
type ownerDeps struct {
	cfg *Config // the copier's current config: changed only between passes
	now func() time.Time
	log *slog.Logger
	m   *metrics
	say partitionReporter
	// takeIn brings a partition's rows in line with the bucket after
	// another tierd may have tiered it (reconcile).
	takeIn func(ctx context.Context, tp remotelog.TopicPartition) error
}

// leaseBucket is the bucket as the lease owner uses it (rsm.Store).
type leaseBucket interface {
	ReadLease(ctx context.Context, tp remotelog.TopicPartition) (rsm.Lease, bool, error)
	CreateLease(ctx context.Context, tp remotelog.TopicPartition, o rsm.Owner) (rsm.Lease, error)
	ReplaceLease(ctx context.Context, tp remotelog.TopicPartition, prev rsm.Lease, o rsm.Owner) (rsm.Lease, error)
	ReadHeartbeat(ctx context.Context, brokerID int32, instanceID string) (rsm.HeartbeatVersioned, bool, error)
	WriteHeartbeat(ctx context.Context, prev *rsm.HeartbeatVersioned, h rsm.Heartbeat) (rsm.HeartbeatVersioned, error)
}

// fenceBucket is the bucket as the leader owner uses it (rsm.Store).
type fenceBucket interface {
	RaiseFence(ctx context.Context, tp remotelog.TopicPartition, f rsm.Fence) (rsm.Fence, error)
}

// newOwner picks the owner: Kafka leadership when a cluster is
// configured, else the bucket lease.
func (c *Copier) newOwner() owner {
	d := ownerDeps{cfg: &c.cfg, now: c.now, log: c.log, m: c.m, say: c, takeIn: func(ctx context.Context, tp remotelog.TopicPartition) error {
		c.needSweep(tp)
		return c.reconcile(ctx, tp)
	}}
	if c.cl == nil {
		return newLeaseOwner(d, c.rs)
	}
	return newLeaderOwner(d, c.rs, c.freshView, func(tp remotelog.TopicPartition) (bool, error) {
		_, ok, err := c.store.Offsets(tp)
		return ok, err
	}, c.reconcile)
}

// owns decides whether this tierd works on a partition now.
func (c *Copier) owns(ctx context.Context, p *partition) (bool, error) { return c.own.owns(ctx, p) }

// renew is called before each copy and remote delete: it renews the
// bucket lease, or checks the cluster's leadership again.
func (c *Copier) renew(ctx context.Context, p *partition) (bool, error) { return c.own.renew(ctx, p) }

// releaseLeases gives up what the owner holds (the leases; leadership
// holds nothing to give up). Run calls it when it returns.
func (c *Copier) releaseLeases(ctx context.Context) {
	c.mu.Lock() // no pass is running
	defer c.mu.Unlock()
	c.own.release(ctx)
}

// leaderOwner decides by the Kafka cluster's leadership: see owns.
type leaderOwner struct {
	ownerDeps
	rs fenceBucket
	// view returns the last cluster view fresh enough to act on, or an
	// error wrapping ErrClusterUnreachable.
	view func() (*cluster.View, error)
	// recorded reports whether the store has the partition at all.
	recorded  func(tp remotelog.TopicPartition) (bool, error)
	reconcile func(ctx context.Context, tp remotelog.TopicPartition) error
	led       ledEpochs
}

func newLeaderOwner(d ownerDeps, rs fenceBucket, view func() (*cluster.View, error), recorded func(remotelog.TopicPartition) (bool, error),
	reconcile func(context.Context, remotelog.TopicPartition) error) *leaderOwner {
	return &leaderOwner{ownerDeps: d, rs: rs, view: view, recorded: recorded, reconcile: reconcile, led: ledEpochs{m: map[remotelog.TopicPartition]int32{}}}
}

// owns is the cluster's answer: the partition is this tierd's when the
// last fresh view names BrokerID its leader. Without a fresh view the
// partition waits (no error).
func (o *leaderOwner) owns(ctx context.Context, p *partition) (bool, error) {
	own, err := o.leads(ctx, p)
	if errors.Is(err, ErrClusterUnreachable) {
		o.say.wait(p.tp, remotelog.WaitClusterUnreachable, "no fresh leadership from the kafka cluster: "+err.Error())
		if o.say.once("unowned " + err.Error()) {
			o.log.Warn("not tiering: no fresh leadership from the kafka cluster", "err", err)
		}
		return false, nil
	}
	return own, err
}

// renew checks leadership again; a leader epoch that moved during the
// pass makes the partition start over on the next one.
func (o *leaderOwner) renew(ctx context.Context, p *partition) (bool, error) {
	epoch := p.leaderEpoch
	own, err := o.owns(ctx, p)
	if own && p.leaderEpoch != epoch {
		o.say.wait(p.tp, remotelog.WaitNextPass, fmt.Sprintf("the partition's leader epoch moved from %d to %d during the pass: it starts over on the next one", epoch, p.leaderEpoch))
		return false, nil
	}
	return own, err
}

func (o *leaderOwner) beginPass()                  {}
func (o *leaderOwner) release(ctx context.Context) {}
