package copier

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// ledEpochs is the leader epoch at which this tierd fenced each
// partition it leads.
type ledEpochs struct {
	mu sync.Mutex
	m  map[remotelog.TopicPartition]int32
}

func (l *ledEpochs) get(tp remotelog.TopicPartition) (int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[tp]
	return e, ok
}

func (l *ledEpochs) set(tp remotelog.TopicPartition, epoch int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[tp] = epoch
}

func (l *ledEpochs) forget(tp remotelog.TopicPartition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, tp)
}

// leads decides ownership by the cluster: the partition is this tierd's
// when the cluster (last fresh view) names BrokerID its leader. It returns
// the leader epoch, and false with no error for a partition led elsewhere
// or unknown to the cluster.
func (o *leaderOwner) leads(ctx context.Context, p *partition) (bool, error) {
	v, err := o.view()
	if err != nil {
		return false, err
	}
	t, ok := v.Topics[p.tp.Topic]
	if !ok {
		o.say.wait(p.tp, remotelog.WaitNotLeader, "the topic is not in the kafka cluster's metadata: not tiering it")
		if o.say.once("notincluster " + p.tp.String()) {
			o.log.Info("topic is not in the cluster's metadata: not tiering it; its copies are deleted only once the cluster confirms its topic id gone",
				"partition", p.tp)
		}
		return false, nil
	}
	part, ok := t.Partitions[p.tp.Partition]
	if !ok || part.Leader != o.cfg.BrokerID {
		o.led.forget(p.tp)
		if ok {
			o.say.wait(p.tp, remotelog.WaitNotLeader, fmt.Sprintf("the kafka cluster names broker %d the partition's leader (this tierd is broker_id %d): its tierd tiers it",
				part.Leader, o.cfg.BrokerID))
		} else {
			o.say.wait(p.tp, remotelog.WaitNotLeader, "the kafka cluster's metadata has no such partition of the topic: not tiering it")
		}
		if o.say.once(fmt.Sprintf("follower %s %d", p.tp, part.Leader)) {
			o.log.Info("partition is led by another broker: its tierd tiers it", "partition", p.tp, "leader", part.Leader, "broker_id", o.cfg.BrokerID)
		}
		return false, nil
	}
	p.leaderEpoch = part.LeaderEpoch
	fenced, known := o.led.get(p.tp)
	if known && fenced == part.LeaderEpoch {
		return true, nil
	}
	// Leadership came to this broker (or its epoch changed): raise the
	// bucket's fence first, so the previous leader's tierd commits no copy
	// from now on, then take in what it copied.
	f := rsm.Fence{TopicID: t.ID, LeaderEpoch: part.LeaderEpoch, BrokerID: o.cfg.BrokerID, InstanceID: o.cfg.InstanceID, RaisedMs: o.now().UnixMilli()}
	if _, err := o.rs.RaiseFence(ctx, p.tp, f); err != nil {
		if errors.Is(err, rsm.ErrFenced) {
			return false, o.say.hold(p.tp, heldFenced, err.Error()+"; the cluster's view may be stale: waiting for it to move on")
		}
		return false, err
	}
	crashpoint.Hit("leader.fenced")
	if ok, err := o.recorded(p.tp); err != nil {
		return false, err
	} else if ok {
		if err := o.reconcile(ctx, p.tp); err != nil {
			return false, fmt.Errorf("take in the previous leader's copies: %w", err)
		}
	}
	o.log.Info("leading the partition: tiering it", "partition", p.tp, "leader_epoch", part.LeaderEpoch)
	o.led.set(p.tp, part.LeaderEpoch)
	return true, nil
}
