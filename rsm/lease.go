package rsm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tierd/tierd/internal/remotelog"
)

// Owner is the ownership lease of a partition, stored as
// "<prefix>/<topic>-<partition>/_owner.json": which tierd (broker id and
// instance id) copies and deletes the partition's segments, and when it
// last renewed the lease. Leases written before instance ids existed have
// only brokerId and renewedMs; they read with InstanceID "" and
// Generation 0.
type Owner struct {
	BrokerID int32 `json:"brokerId"`
	// InstanceID is the holder's instance id (kept in its metadata dir),
	// which tells apart two tierds given the same broker id.
	InstanceID string `json:"instanceId,omitempty"`
	// RenewedMs is when the holder last wrote the lease, ms since the
	// epoch by its clock.
	RenewedMs int64 `json:"renewedMs"`
	// Generation counts the writes of this lease object; the Manager sets
	// it, so that every write stores new bytes (and gets a new version).
	Generation int64 `json:"generation,omitempty"`
	// Released is set when the holder gave the lease up (on shutdown):
	// any tierd may take it at once.
	Released bool `json:"released,omitempty"`
	// Reconcile is set by a tierd that took the lease over from another
	// one, until it has brought its rows in line with the bucket: a tierd
	// that finds its own lease with it set (after a crash) reconciles
	// before acting.
	Reconcile bool `json:"reconcile,omitempty"`
}

// Lease is a lease object as read or written, with the version a
// conditional replace must name.
type Lease struct {
	Owner
	Version Version
}

// OwnerObject is the name of the ownership lease object in a partition prefix.
const OwnerObject = "_owner.json"

func (m *Manager) leaseKey(tp remotelog.TopicPartition) string {
	return m.PartitionPrefix(tp) + OwnerObject
}

// ReadLease returns a partition's lease and its version, and false when
// there is none. Errors: ErrBadManifest (wrapped) for an unreadable lease
// object, transport errors.
func (m *Manager) ReadLease(ctx context.Context, tp remotelog.TopicPartition) (Lease, bool, error) {
	data, v, err := m.b.ReadVersioned(ctx, m.leaseKey(tp))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Lease{}, false, nil
		}
		return Lease{}, false, err
	}
	l := Lease{Version: v}
	if err := json.Unmarshal(data, &l.Owner); err != nil {
		return Lease{}, false, fmt.Errorf("%w: %s: %v", ErrBadManifest, m.leaseKey(tp), err)
	}
	return l, true, nil
}

// CreateLease writes o as a partition's lease when it has none (S3's
// "If-None-Match: *"), with Generation 1, and returns what it wrote.
// Errors: ErrPreconditionFailed (wrapped) when a lease object exists,
// transport errors.
func (m *Manager) CreateLease(ctx context.Context, tp remotelog.TopicPartition, o Owner) (Lease, error) {
	o.Generation = 1
	data, err := json.Marshal(o)
	if err != nil {
		return Lease{}, err
	}
	v, err := m.b.PutIfAbsent(ctx, m.leaseKey(tp), data)
	if err != nil {
		return Lease{}, fmt.Errorf("create lease %s: %w", m.leaseKey(tp), err)
	}
	return Lease{Owner: o, Version: v}, nil
}

// ReplaceLease writes o as a partition's lease in place of prev, only
// when the lease object is still at prev's version (S3's "If-Match"),
// with the generation after prev's, and returns what it wrote. Errors:
// ErrPreconditionFailed (wrapped) when another write came first,
// transport errors.
func (m *Manager) ReplaceLease(ctx context.Context, tp remotelog.TopicPartition, prev Lease, o Owner) (Lease, error) {
	o.Generation = prev.Generation + 1
	data, err := json.Marshal(o)
	if err != nil {
		return Lease{}, err
	}
	v, err := m.b.PutIfMatch(ctx, m.leaseKey(tp), data, prev.Version)
	if err != nil {
		return Lease{}, fmt.Errorf("replace lease %s: %w", m.leaseKey(tp), err)
	}
	return Lease{Owner: o, Version: v}, nil
}

// ReleaseLease gives up a lease this tierd wrote as held: it is replaced,
// only when still at held's version, by the same owner marked Released at
// nowMs, so that another tierd can take it at once. The object is not
// deleted: a delete cannot be made conditional on every store. Errors as
// ReplaceLease.
func (m *Manager) ReleaseLease(ctx context.Context, tp remotelog.TopicPartition, held Lease, nowMs int64) (Lease, error) {
	o := held.Owner
	o.Released, o.RenewedMs = true, nowMs
	return m.ReplaceLease(ctx, tp, held, o)
}
