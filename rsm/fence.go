package rsm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tierd/tierd/internal/remotelog"
)

// FenceObject is the name of a partition's leader-epoch fence in its
// prefix: "<prefix>/<topic>-<partition>/_leader_epoch.json".
const FenceObject = "_leader_epoch.json"

// Fence is the highest leader epoch under which a tierd has tiered a
// partition, as the Kafka cluster gave it (KIP-101 leader epochs). A new
// leader's tierd raises it before it acts; a copy made under a lower
// epoch is then never committed (its tierd checks the fence before and
// after writing the copy's manifest).
type Fence struct {
	// TopicID is the incarnation the epoch belongs to: a re-created
	// topic's epochs start over, and another incarnation's fence does not
	// fence it.
	TopicID     string `json:"topicId,omitempty"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	BrokerID    int32  `json:"brokerId"`
	InstanceID  string `json:"instanceId,omitempty"`
	RaisedMs    int64  `json:"raisedMs"`
}

// ErrFenced is returned when a partition's fence is above the caller's
// leader epoch: another broker leads it now.
var ErrFenced = errors.New("rsm: a newer leader epoch fences this partition")

func (m *Manager) fenceKey(tp remotelog.TopicPartition) string {
	return m.PartitionPrefix(tp) + FenceObject
}

// ReadFence returns a partition's fence, and false when it has none.
// Errors: ErrBadManifest (wrapped) for an unreadable object, transport
// errors.
func (m *Manager) ReadFence(ctx context.Context, tp remotelog.TopicPartition) (Fence, bool, error) {
	f, _, ok, err := m.readFence(ctx, tp)
	return f, ok, err
}

func (m *Manager) readFence(ctx context.Context, tp remotelog.TopicPartition) (Fence, Version, bool, error) {
	var f Fence
	data, v, err := m.b.ReadVersioned(ctx, m.fenceKey(tp))
	if errors.Is(err, ErrNotFound) {
		return f, v, false, nil
	}
	if err != nil {
		return f, v, false, err
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, v, false, fmt.Errorf("%w: %s: %v", ErrBadManifest, m.fenceKey(tp), err)
	}
	return f, v, true, nil
}

// RaiseFence makes a partition's fence at least f.LeaderEpoch for
// incarnation f.TopicID (a fence of another incarnation is replaced) with
// conditional writes (create if absent, else replace the version read),
// retrying a lost race a few times. It returns the fence as stored.
// Errors: ErrFenced (wrapped) when the stored epoch is already above
// f.LeaderEpoch, ErrPreconditionFailed after repeated lost races,
// transport errors.
func (m *Manager) RaiseFence(ctx context.Context, tp remotelog.TopicPartition, f Fence) (Fence, error) {
	data, err := json.Marshal(f)
	if err != nil {
		return f, err
	}
	for try := 0; ; try++ {
		cur, v, ok, err := m.readFence(ctx, tp)
		if err != nil {
			return cur, err
		}
		same := !ok || sameIncarnation(cur.TopicID, f.TopicID)
		switch {
		case ok && same && cur.LeaderEpoch > f.LeaderEpoch:
			return cur, fmt.Errorf("%w: %s fence at leader epoch %d (broker %d), this copier's epoch %d", ErrFenced, tp, cur.LeaderEpoch, cur.BrokerID, f.LeaderEpoch)
		case ok && same && cur.LeaderEpoch == f.LeaderEpoch:
			return cur, nil
		case ok:
			_, err = m.b.PutIfMatch(ctx, m.fenceKey(tp), data, v)
		default:
			_, err = m.b.PutIfAbsent(ctx, m.fenceKey(tp), data)
		}
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, ErrPreconditionFailed) || try >= 4 {
			return f, fmt.Errorf("raise the leader-epoch fence of %s: %w", tp, err)
		}
	}
}

// sameIncarnation reports whether two topic ids may name one incarnation
// ("" is unknown and matches any).
func sameIncarnation(a, b string) bool { return a == "" || b == "" || a == b }

// CheckFence returns ErrFenced (wrapped) when a partition's fence, for
// incarnation topicID, is above leaderEpoch.
func (m *Manager) CheckFence(ctx context.Context, tp remotelog.TopicPartition, topicID string, leaderEpoch int32) error {
	cur, ok, err := m.ReadFence(ctx, tp)
	if err != nil {
		return fmt.Errorf("read the leader-epoch fence of %s: %w", tp, err)
	}
	if ok && sameIncarnation(cur.TopicID, topicID) && cur.LeaderEpoch > leaderEpoch {
		return fmt.Errorf("%w: %s fence at leader epoch %d (broker %d), the copy's epoch %d", ErrFenced, tp, cur.LeaderEpoch, cur.BrokerID, leaderEpoch)
	}
	return nil
}
